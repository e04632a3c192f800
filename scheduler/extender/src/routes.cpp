// Mounting the verbs on an httplib server (see extender.hpp).
#include "metronome/extender/extender.hpp"

namespace metronome::extender {

void RegisterRoutes(httplib::Server& server, Extender& extender, const std::string& prefix) {
  const auto reply = [](httplib::Response& res, const ExtenderResponse& r) {
    res.status = r.status;
    res.set_content(r.body, r.content_type.c_str());
  };
  server.Post(prefix + "/filter",
              [&extender, reply](const httplib::Request& req, httplib::Response& res) {
                reply(res, extender.HandleFilter(req.body));
              });
  server.Post(prefix + "/prioritize",
              [&extender, reply](const httplib::Request& req, httplib::Response& res) {
                reply(res, extender.HandlePrioritize(req.body));
              });
}

}  // namespace metronome::extender
