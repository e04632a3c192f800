// The shim's own ZMTP transport against a libzmq ROUTER that sends heartbeats (ZMQ_HEARTBEAT_IVL,
// as a scheduler behind a ZeroMQ proxy or a future scheduler version may): the transport answers
// every PING, so libzmq never drops the connection, even while the shim has nothing to say.
#include <gtest/gtest.h>
#include <zmq.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <zmq.hpp>

#include "config.hpp"
#include "metronome/common/clock.hpp"
#include "transport.hpp"

namespace metronome::shim {
namespace {

using namespace std::chrono_literals;

// A ROUTER that pings every 50 ms and drops a peer that has not answered within 500 ms (room for
// a test thread that a loaded machine leaves unscheduled for a while), with a monitor that counts
// its accepted and lost connections.
class HeartbeatRouter {
 public:
  HeartbeatRouter()
      : sock_(ctx_, zmq::socket_type::router), monitor_(ctx_, zmq::socket_type::pair) {
    sock_.set(zmq::sockopt::linger, 0);
    sock_.set(zmq::sockopt::heartbeat_ivl, kIntervalMs);
    sock_.set(zmq::sockopt::heartbeat_timeout, kTimeoutMs);
    sock_.set(zmq::sockopt::heartbeat_ttl, 10 * kTimeoutMs);
    sock_.bind("tcp://127.0.0.1:*");
    endpoint_ = sock_.get(zmq::sockopt::last_endpoint);
    const int rc = zmq_socket_monitor(sock_.handle(), "inproc://heartbeat-router-monitor",
                                      ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED);
    EXPECT_EQ(rc, 0) << zmq_strerror(zmq_errno());
    monitor_.set(zmq::sockopt::linger, 0);
    monitor_.connect("inproc://heartbeat-router-monitor");
  }

  static constexpr int kIntervalMs = 50;
  static constexpr int kTimeoutMs = 500;

  const std::string& Endpoint() const { return endpoint_; }
  int Accepted() const { return accepted_; }
  int Disconnected() const { return disconnected_; }

  // Reads the monitor's events without waiting.
  void CountEvents() {
    zmq::message_t event;
    zmq::message_t address;
    while (monitor_.recv(event, zmq::recv_flags::dontwait)) {
      (void)monitor_.recv(address);  // every event comes with its endpoint
      uint16_t id = 0;
      if (event.size() >= sizeof id) std::memcpy(&id, event.data(), sizeof id);
      accepted_ += id == ZMQ_EVENT_ACCEPTED ? 1 : 0;
      disconnected_ += id == ZMQ_EVENT_DISCONNECTED ? 1 : 0;
    }
  }

  // One message from a DEALER (identity, payload), without waiting; false when none.
  bool Receive(std::string& identity, std::string& payload) {
    zmq::message_t id;
    if (!sock_.recv(id, zmq::recv_flags::dontwait)) return false;
    zmq::message_t body;
    (void)sock_.recv(body);  // a ROUTER delivers the identity and the payload together
    identity = id.to_string();
    payload = body.to_string();
    return true;
  }

  void Send(const std::string& identity, const std::string& payload) {
    sock_.send(zmq::buffer(identity), zmq::send_flags::sndmore);
    sock_.send(zmq::buffer(payload), zmq::send_flags::none);
  }

 private:
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  zmq::socket_t monitor_;
  std::string endpoint_;
  int accepted_ = 0;
  int disconnected_ = 0;
};

// Drives the transport as the shim's background thread does (wait, service, read everything)
// and the router's side (its monitor, its messages) until `done` holds or `limit` passes.
template <class Done>
bool DriveUntil(Transport& t, HeartbeatRouter& r, std::chrono::milliseconds limit, Done done) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    t.Wait(5, -1);
    t.Service(RealtimeNs());
    r.CountEvents();
    if (done()) return true;
  }
  return false;
}

TEST(ShimTransport, TheZmtpTransportAnswersALibzmqRoutersHeartbeats) {
  HeartbeatRouter router;
  Config c;
  c.scheduler = router.Endpoint();
  const std::unique_ptr<Transport> t = MakeZmtpTransport();
  ASSERT_TRUE(t->Open(c));

  // Connected once a send goes through (a send while not connected fails: nothing is queued).
  ASSERT_TRUE(DriveUntil(*t, router, 3s, [&] { return t->Send("first"); }));
  std::string identity;
  std::string payload;
  ASSERT_TRUE(DriveUntil(*t, router, 3s, [&] { return router.Receive(identity, payload); }));
  EXPECT_EQ(payload, "first");

  // Three seconds of silence from the shim: sixty PINGs, six times the router's timeout.
  std::string unexpected;
  bool multipart = false;
  DriveUntil(*t, router, 3s, [&] { return t->Receive(unexpected, multipart); });
  EXPECT_TRUE(unexpected.empty()) << "the router's heartbeats reached the caller as a message";

  // Still the same connection, both ways.
  ASSERT_TRUE(t->Send("second")) << "not connected after the silence: PINGs not answered";
  std::string identity2;
  ASSERT_TRUE(DriveUntil(*t, router, 3s, [&] { return router.Receive(identity2, payload); }));
  EXPECT_EQ(payload, "second");
  EXPECT_EQ(identity2, identity);
  router.Send(identity, "reply");
  std::string reply;
  ASSERT_TRUE(DriveUntil(*t, router, 3s, [&] { return t->Receive(reply, multipart); }));
  EXPECT_EQ(reply, "reply");
  EXPECT_FALSE(multipart);

  DriveUntil(*t, router, 50ms, [] { return false; });
  EXPECT_EQ(router.Accepted(), 1) << "the transport reconnected: a connection was dropped";
  EXPECT_EQ(router.Disconnected(), 0) << "libzmq dropped the connection: PINGs not answered";
  t->Close(0);
}

}  // namespace
}  // namespace metronome::shim
