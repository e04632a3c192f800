// The ZeroMQ endpoint for shims: the ROUTER socket and the thread that owns it. It receives each
// message and hands it to the registry, sends what the registry queued (replies, timetable
// pushes), and runs the registry's tick. It never runs the planner, so a long re-plan delays
// neither clock pongs (whose timestamps the shims' clock sync relies on) nor registrations.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "metronome/service/config.hpp"
#include "metronome/service/metrics.hpp"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace metronome::service {

class Registry;

class Endpoint {
 public:
  Endpoint(const ServiceConfig& config, Metrics& metrics, Registry& registry);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Binds (throws ConfigError for bad CURVE keys, std::runtime_error when it cannot bind).
  void Bind();
  void Start();
  void Stop();
  // From any thread: the registry has messages to send.
  void Wake();
  const std::string& BoundEndpoint() const { return bound_endpoint_; }

 private:
  void Loop();
  void Flush();

  const ServiceConfig& config_;
  Metrics& metrics_;
  Registry& registry_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::string bound_endpoint_;
  int wake_fd_ = -1;  // eventfd
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace metronome::service
