// The service's own HTTP route groups. Another group (e.g. the kube-scheduler extender) is
// added the same way: implement RouteGroup and pass it to Service::http().AddRouteGroup().
#pragma once

#include "metronome/service/http_server.hpp"

namespace metronome::service {

class Service;

// /healthz, /metrics, /api/v1/... (status, jobs, links, timetables, phases, what-if).
class StatusRoutes : public RouteGroup {
 public:
  explicit StatusRoutes(Service& service) : service_(service) {}
  void Register(HttpServer& server) override;

 private:
  Service& service_;
};

// / and /timeline: the self-contained timeline page (it reads /api/v1/timeline).
class TimelineRoutes : public RouteGroup {
 public:
  void Register(HttpServer& server) override;
  static const char* Html();
};

}  // namespace metronome::service
