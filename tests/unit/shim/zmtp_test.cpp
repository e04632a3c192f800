// The built-in ZMTP 3.0 codec and reader (the live handshake with libzmq: shim_safety_test and
// shim_transport_test).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zmtp.hpp"

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

// What a ROUTER sends a DEALER: its greeting (as server) and READY.
std::string PeerHello() {
  std::string g = zmtp::Greeting();
  g[32] = 1;
  return g + zmtp::ReadyCommand("ROUTER");
}

std::string Command(const std::string& name, const std::string& data) {
  std::string body(1, static_cast<char>(name.size()));
  return zmtp::Frame(body + name + data, false, true);
}

std::vector<std::pair<std::string, bool>> Drain(zmtp::Reader& r) {
  std::vector<std::pair<std::string, bool>> got;
  std::string m;
  bool multipart = false;
  while (r.Pop(m, multipart)) got.emplace_back(m, multipart);
  return got;
}

TEST(ZmtpReader, TheSameMessagesWhateverPiecesTheBytesArriveIn) {
  const std::string bytes = PeerHello() + zmtp::Frame("one", false, false) +
                            zmtp::Frame(std::string(300, 'x'), false, false) +
                            zmtp::Frame("head", true, false) + zmtp::Frame("tail", false, false);
  zmtp::Reader whole;
  ASSERT_TRUE(whole.Feed(bytes.data(), bytes.size()));
  zmtp::Reader bytewise;
  for (const char c : bytes) ASSERT_TRUE(bytewise.Feed(&c, 1));
  const auto a = Drain(whole);
  EXPECT_EQ(a, Drain(bytewise));
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], std::make_pair(std::string("one"), false));
  EXPECT_EQ(a[1].first.size(), 300u);
  EXPECT_EQ(a[2], std::make_pair(std::string("head"), true)) << "multi-part: first frame, flagged";
  EXPECT_TRUE(whole.Ready());
}

TEST(ZmtpReader, APingIsAnsweredWithItsContextOnceReady) {
  zmtp::Reader r;
  const std::string early = PeerHello().substr(0, 64) + Command("PING", std::string("\0\x0a", 2));
  ASSERT_TRUE(r.Feed(early.data(), early.size()));
  EXPECT_TRUE(r.TakeReplies().empty()) << "no PONG before READY";
  const std::string rest =
      PeerHello().substr(64) + Command("PING", std::string("\0\x0a", 2) + "ctx");
  ASSERT_TRUE(r.Feed(rest.data(), rest.size()));
  EXPECT_EQ(r.TakeReplies(), Command("PONG", "ctx"));
  EXPECT_TRUE(r.TakeReplies().empty()) << "handed over once";
}

TEST(ZmtpReader, APeerThatBreaksTheProtocolIsDropped) {
  const auto fails = [](const std::string& bytes) {
    zmtp::Reader r;
    return !r.Feed(bytes.data(), bytes.size());
  };
  EXPECT_TRUE(fails("GET / HTTP/1.1")) << "not ZMTP: dropped at the first byte";
  std::string plain = PeerHello();
  plain[12] = 'P';  // PLAIN, not NULL
  EXPECT_TRUE(fails(plain));
  EXPECT_TRUE(fails(PeerHello().substr(0, 64) + zmtp::Frame("data", false, false)))
      << "data before READY";
  EXPECT_TRUE(fails(PeerHello() + zmtp::ReadyCommand("ROUTER"))) << "READY twice";
  EXPECT_TRUE(fails(PeerHello() + Command("ERROR", std::string("\x03") + "bad")));
  EXPECT_TRUE(fails(PeerHello() + std::string("\x02\xff\xff\xff\xff\xff\xff\xff\xff", 9)))
      << "a frame longer than kMaxBody";
  // What came before the violation stays readable.
  zmtp::Reader r;
  const std::string bytes =
      PeerHello() + zmtp::Frame("kept", false, false) + std::string("\x08\x01", 2);
  EXPECT_FALSE(r.Feed(bytes.data(), bytes.size()));
  EXPECT_EQ(Drain(r), (std::vector<std::pair<std::string, bool>>{{"kept", false}}));
}

TEST(ZmtpReader, ResetExpectsANewGreetingAndKeepsUnreadMessages) {
  zmtp::Reader r;
  const std::string first =
      PeerHello() + zmtp::Frame("unread", false, false) + zmtp::Frame("half", true, false);
  ASSERT_TRUE(r.Feed(first.data(), first.size()));
  r.Reset();
  EXPECT_FALSE(r.Ready());
  const std::string second = PeerHello() + zmtp::Frame("next", false, false);
  ASSERT_TRUE(r.Feed(second.data(), second.size()));
  EXPECT_EQ(Drain(r),
            (std::vector<std::pair<std::string, bool>>{{"unread", false}, {"next", false}}))
      << "the half message of the old connection is gone";
}

}  // namespace
}  // namespace metronome::shim
