// The built-in ZMTP 3.0 framing (the live handshake with libzmq is covered by the safety tests).
#include <gtest/gtest.h>

#include <string>

#include "transport.hpp"

namespace metronome::shim {
namespace {

TEST(Zmtp, GreetingIsNullMechanismVersion3AsClient) {
  const std::string g = zmtp::Greeting();
  ASSERT_EQ(g.size(), 64u);
  EXPECT_EQ(static_cast<unsigned char>(g[0]), 0xffu);
  EXPECT_EQ(g[9], 0x7f);
  EXPECT_EQ(g[10], 3);
  EXPECT_EQ(g.substr(12, 4), "NULL");
  EXPECT_EQ(g[16], 0);
  EXPECT_EQ(g[32], 0);  // not as-server
}

TEST(Zmtp, ReadyCarriesTheSocketType) {
  const std::string r = zmtp::ReadyCommand("DEALER");
  EXPECT_EQ(static_cast<unsigned char>(r[0]), 0x04u);  // short command
  const std::string body = r.substr(2);
  EXPECT_EQ(static_cast<size_t>(static_cast<unsigned char>(r[1])), body.size());
  EXPECT_EQ(body.substr(0, 6), std::string("\x05READY"));
  EXPECT_NE(body.find("Socket-Type"), std::string::npos);
  EXPECT_EQ(body.substr(body.size() - 6), "DEALER");
}

TEST(Zmtp, ShortAndLongFramesRoundTrip) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{255}, size_t{256}, size_t{70000}}) {
    const std::string payload(n, 'x');
    const std::string f = zmtp::Frame(payload, n == 1, false);
    bool more = false;
    bool command = true;
    std::string body;
    ASSERT_EQ(zmtp::ParseFrame(f, 100000, more, command, body), static_cast<long>(f.size())) << n;
    EXPECT_EQ(body, payload);
    EXPECT_EQ(more, n == 1);
    EXPECT_FALSE(command);
    // Any prefix is incomplete, never an error.
    if (f.size() > 1) {
      EXPECT_EQ(zmtp::ParseFrame(f.substr(0, f.size() - 1), 100000, more, command, body), 0);
    }
  }
}

TEST(Zmtp, RejectsReservedFlagsAndOversizedFrames) {
  bool more = false;
  bool command = false;
  std::string body;
  EXPECT_EQ(zmtp::ParseFrame(std::string("\x08\x01x", 3), 100, more, command, body), -1);
  EXPECT_EQ(
      zmtp::ParseFrame(zmtp::Frame(std::string(300, 'y'), false, false), 100, more, command, body),
      -1);
}

}  // namespace
}  // namespace metronome::shim
