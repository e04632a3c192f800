// How the background thread talks to the scheduler: a DEALER-like connection that sends and
// receives single-frame messages. Two implementations:
//   - ZmtpTransport (default): ZMTP 3.0, the ZeroMQ wire protocol, spoken directly over one
//     non-blocking TCP socket (NULL security). No library and no thread beyond the shim's own.
//   - ZmqTransport: libzmq's DEALER (opened at run time), used when the scheduler runs CURVE
//     (METRONOME_CURVE_SERVERKEY); libzmq then adds its I/O and reaper threads.
// Both behave like a DEALER with ZMQ_IMMEDIATE: a send while not connected fails (nothing is
// queued for later), and they reconnect by themselves (100 ms, backing off to 1 s).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace metronome::shim {

struct Config;

class Transport {
 public:
  virtual ~Transport() = default;
  // False (with a log line) when the endpoint or the transport cannot be set up at all.
  virtual bool Open(const Config& c) = 0;
  // Waits until a message may be read, `wake_fd` is readable, or `timeout_ms` passed.
  virtual void Wait(long timeout_ms, int wake_fd) = 0;
  // Drives connection state (reconnects); call after Wait.
  virtual void Service(int64_t now_ns) = 0;
  // One message, without blocking. Returns false when none is ready. `multipart` is set when
  // the peer sent several frames (the caller rejects those).
  virtual bool Receive(std::string& out, bool& multipart) = 0;
  // Without blocking; false when not connected or the send buffer is full.
  virtual bool Send(const std::string& bytes) = 0;
  // `linger_ms`: how long to try to flush what is pending.
  virtual void Close(int linger_ms) = 0;
  virtual const char* Describe() const = 0;
  // In a forked child: release the inherited socket without talking on it (libzmq's state must
  // not be touched there at all, so its transport does nothing).
  virtual void AbandonAfterFork() {}
};

std::unique_ptr<Transport> MakeZmtpTransport();
std::unique_ptr<Transport> MakeZmqTransport();

}  // namespace metronome::shim
