// The service tests' side of the wire: the next protocol message on a DEALER, within 2 s.
#pragma once

#include <chrono>
#include <optional>
#include <zmq.hpp>

#include "metronome/common/protocol.hpp"

namespace metronome::service {

inline std::optional<proto::Message> Recv(zmq::socket_t& s) {
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(2000)) <= 0) return std::nullopt;
  zmq::message_t m;
  if (!s.recv(m, zmq::recv_flags::dontwait)) return std::nullopt;
  auto d = proto::Decode(m.data(), m.size());
  if (!d.Ok()) return std::nullopt;
  return d.message;
}

}  // namespace metronome::service
