#include "metronome/common/protocol.hpp"

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include <algorithm>
#include <functional>
#include <random>

namespace metronome::proto {
namespace {

std::vector<Message> OneOfEach() {
  Hello hello;
  hello.job_id = "bert-large-7";
  hello.node = "gpu-node-12";
  hello.rank = 3;
  hello.world_size = 16;
  hello.priority = 2;
  hello.pid = 4242;
  hello.nccl_version = 22809;
  hello.shim_version = "0.1.0";

  ProfileReport rep;
  rep.job_id = "bert-large-7";
  rep.rank = 3;
  rep.iterations = 1234;
  rep.period_ns = 312'000'000;
  rep.comm_ns = 91'000'000;
  rep.bytes_per_phase = 1'360'000'000;
  rep.collectives_per_phase = 55;
  rep.confidence = 0.97;
  rep.clock_offset_ns = -12'345;
  rep.clock_error_ns = 800;
  rep.timetable_version = 9;
  rep.gated = 1200;
  rep.late = 3;
  rep.failed_open = 1;
  rep.phase_starts_ns = {1'700'000'000'000'000'000, 1'700'000'000'312'000'000};
  rep.hold_ns = 12'000'000;
  rep.jitter_ns = 2'500'000;
  rep.compute_ns = 280'000'000;
  rep.realigned = 3;
  rep.yielded = 410;
  rep.yield_wait_ns = 9'800'000'000;

  TimetablePush push;
  push.job_id = "bert-large-7";
  push.timetable = {
      9, 1'700'000'000'000'000'000, 400'000'000, 25'000'000, 120'000'000, 10'000'000, 200'000'000};
  // Three higher-priority windows of unrelated periods to yield to.
  push.yields.epoch_ns = push.timetable.epoch_ns;
  push.yields.need_ns = 60'000'000;
  push.yields.max_wait_ns = 400'000'000;
  push.yields.tolerance_ns = 4'000'000;
  push.yields.allowance_ns = 5'000'000;
  push.yields.count = 3;
  push.yields.windows[0] = {283'000'000, 12'000'000, 86'000'000};
  push.yields.windows[1] = {517'000'000, 400'000'000, 120'000'000};
  push.yields.windows[2] = {190'000'000, 0, 30'000'000};

  TurnPush turns;
  turns.job_id = "bert-large-7";
  turns.version = 4;
  turns.send_edges = true;
  turns.turns.wire_ns = 91'000'000;
  turns.turns.period_ns = 371'000'000;
  turns.turns.count = 2;
  turns.turns.partners[0] = {12, false, 120'000'000, 150'000'000, 0, 0};
  turns.turns.partners[1] = {31, true, 40'000'000, 300'000'000, 0, 0};

  return {
      hello,
      Welcome{77, 1000, 1'700'000'000'000'000'000, kFeatureTurns},
      ClockPing{5, 1'700'000'000'000'000'001},
      ClockPong{5, 1'700'000'000'000'000'001, 1'700'000'000'000'050'000, 1'700'000'000'000'060'000},
      rep,
      push,
      Bye{"bert-large-7", 3, "communicator destroyed"},
      Error{ErrorCode::kUnexpected, "report before hello"},
      PhaseEdge{"bert-large-7", 3, true, 1'700'000'000'000'000'002},
      turns,
      TurnEdge{"bert-large-7", 12, false, 1'700'000'000'000'000'003}};
}

// Field-by-field equality through re-encoding: the encoding is canonical, so equal bytes mean
// equal messages.
TEST(Protocol, EveryMessageRoundTrips) {
  for (const Message& m : OneOfEach()) {
    const std::string bytes = Encode(m);
    const Decoded d = Decode(bytes);
    ASSERT_TRUE(d.Ok()) << TypeName(TypeOf(m)) << ": " << d.detail;
    EXPECT_EQ(TypeOf(d.message), TypeOf(m));
    EXPECT_EQ(Encode(d.message), bytes) << TypeName(TypeOf(m));
  }
}

TEST(Protocol, DecodedFieldsMatch) {
  const auto msgs = OneOfEach();
  const Decoded d = Decode(Encode(msgs[5]));
  ASSERT_TRUE(d.Ok());
  const auto& push = std::get<TimetablePush>(d.message);
  EXPECT_EQ(push.job_id, "bert-large-7");
  EXPECT_EQ(push.timetable.version, 9u);
  EXPECT_EQ(push.timetable.period_ns, 400'000'000);
  EXPECT_EQ(push.timetable.late_slack_ns, 10'000'000);

  const Decoded r = Decode(Encode(msgs[4]));
  ASSERT_TRUE(r.Ok());
  const auto& rep = std::get<ProfileReport>(r.message);
  EXPECT_DOUBLE_EQ(rep.confidence, 0.97);
  EXPECT_EQ(rep.clock_offset_ns, -12'345);
  ASSERT_EQ(rep.phase_starts_ns.size(), 2u);
  EXPECT_EQ(rep.phase_starts_ns[1], 1'700'000'000'312'000'000);
  EXPECT_EQ(rep.hold_ns, 12'000'000);
  EXPECT_EQ(rep.jitter_ns, 2'500'000);
  EXPECT_EQ(rep.compute_ns, 280'000'000);
  EXPECT_EQ(rep.realigned, 3u);
}

TEST(Protocol, ProfileReportWithoutTheOptionalHoldFieldDecodes) {
  // A report as the first protocol-1 peers sent it: 15 fields, no hold_ns.
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(3);
  pk.pack(kProtocolVersion);
  pk.pack(static_cast<uint32_t>(MessageType::kProfileReport));
  pk.pack_array(15);
  pk.pack(std::string("j"));
  for (int i = 0; i < 6; ++i) pk.pack(i + 1);  // rank .. collectives_per_phase
  pk.pack(0.5);                                // confidence
  for (int i = 0; i < 6; ++i) pk.pack(0);      // clock offset .. failed_open
  pk.pack_array(0);
  const Decoded d = Decode(buf.data(), buf.size());
  ASSERT_TRUE(d.Ok()) << d.detail;
  EXPECT_EQ(std::get<ProfileReport>(d.message).hold_ns, 0);
  EXPECT_EQ(std::get<ProfileReport>(d.message).jitter_ns, 0);
  EXPECT_EQ(std::get<ProfileReport>(d.message).compute_ns, 0);
  EXPECT_EQ(std::get<ProfileReport>(d.message).realigned, 0u);
}

// The pod fields are trailing and optional: a hello without them is as older shims sent it, and
// the encoder writes them up to the last one set.
TEST(Protocol, HelloCarriesThePodWhenItKnowsIt) {
  Hello h;
  h.job_id = "j";
  h.node = "n";
  h.world_size = 2;
  const auto fields = [](const std::string& wire) {
    const msgpack::object_handle oh = msgpack::unpack(wire.data(), wire.size());
    return oh.get().via.array.ptr[2].via.array.size;
  };
  EXPECT_EQ(fields(Encode(h)), 8u);
  Decoded d = Decode(Encode(h));
  ASSERT_TRUE(d.Ok()) << d.detail;
  EXPECT_EQ(std::get<Hello>(d.message).pod_uid, "");
  h.pod_namespace = "team-a";
  EXPECT_EQ(fields(Encode(h)), 9u);
  h.pod_name = "bert-0";
  h.pod_uid = "0d3c5a2e-7f1b-4c4e-9a51-3f0e6d2b8c11";
  EXPECT_EQ(fields(Encode(h)), 11u);
  d = Decode(Encode(h));
  ASSERT_TRUE(d.Ok()) << d.detail;
  const auto& got = std::get<Hello>(d.message);
  EXPECT_EQ(got.pod_namespace, "team-a");
  EXPECT_EQ(got.pod_name, "bert-0");
  EXPECT_EQ(got.pod_uid, h.pod_uid);
  h.pod_uid = "\xff";
  d = Decode(Encode(h));
  EXPECT_EQ(d.error, DecodeError::kBadField);
  EXPECT_NE(d.detail.find("'pod_uid'"), std::string::npos) << d.detail;
}

// Features ride in trailing fields: a hello or welcome without them is as older peers send it
// (and decodes as none), and a hello with them carries its pod fields, empty or not, before.
TEST(Protocol, FeaturesAreTrailingFieldsOlderPeersLeaveOut) {
  Hello h;
  h.job_id = "j";
  h.world_size = 2;
  const std::string plain = Encode(h);
  h.features = kFeatureTurns;
  const std::string with = Encode(h);
  EXPECT_GT(with.size(), plain.size());
  const Decoded d = Decode(with);
  ASSERT_TRUE(d.Ok()) << d.detail;
  EXPECT_EQ(std::get<Hello>(d.message).features, kFeatureTurns);
  EXPECT_EQ(std::get<Hello>(d.message).pod_uid, "");
  EXPECT_EQ(std::get<Hello>(Decode(plain).message).features, 0u);
  EXPECT_EQ(Encode(Welcome{1, 1000, 5, 0}).size() + 1, Encode(Welcome{1, 1000, 5, 1}).size());
  EXPECT_EQ(std::get<Welcome>(Decode(Encode(Welcome{1, 1000, 5, 0})).message).features, 0u);
}

TEST(Protocol, ATurnPushCarriesItsPartnersAndAnEmptyOneMeansNoTurns) {
  const auto msgs = OneOfEach();
  const Decoded d = Decode(Encode(msgs[9]));
  ASSERT_TRUE(d.Ok()) << d.detail;
  const auto& p = std::get<TurnPush>(d.message);
  EXPECT_EQ(p.version, 4u);
  EXPECT_TRUE(p.send_edges);
  EXPECT_EQ(p.turns, std::get<TurnPush>(msgs[9]).turns);
  TurnPush none;
  none.job_id = "j";
  none.version = 5;
  none.turns.wire_ns = 77;  // no partners: the figures do not go out
  const Decoded e = Decode(Encode(none));
  ASSERT_TRUE(e.Ok()) << e.detail;
  EXPECT_EQ(std::get<TurnPush>(e.message).turns, TurnSet{});
  const Decoded relayed = Decode(Encode(msgs[10]));
  ASSERT_TRUE(relayed.Ok()) << relayed.detail;
  const auto& edge = std::get<TurnEdge>(relayed.message);
  EXPECT_EQ(edge.partner, 12u);
  EXPECT_FALSE(edge.begun);
}

TEST(Protocol, EncoderTruncatesOverlongFieldsSoTheResultDecodes) {
  ProfileReport rep;
  rep.job_id = std::string(1000, 'j');
  rep.phase_starts_ns.resize(500);
  for (size_t i = 0; i < rep.phase_starts_ns.size(); ++i) rep.phase_starts_ns[i] = int64_t(i);
  const Decoded d = Decode(Encode(rep));
  ASSERT_TRUE(d.Ok()) << d.detail;
  const auto& got = std::get<ProfileReport>(d.message);
  EXPECT_EQ(got.job_id.size(), kMaxStringBytes);
  ASSERT_EQ(got.phase_starts_ns.size(), kMaxPhaseStarts);
  EXPECT_EQ(got.phase_starts_ns.back(), 499);  // the most recent are kept
}

// A name cut to the limit is cut where a character starts: still UTF-8, so it still decodes.
TEST(Protocol, EncoderCutsOverlongNamesBetweenCharacters) {
  Hello h;
  h.job_id.clear();
  for (int i = 0; i < 100; ++i) h.job_id += "\u20ac";  // 3 bytes each: 256 cuts one in two
  h.node = "n";
  h.world_size = 1;
  const Decoded d = Decode(Encode(h));
  ASSERT_TRUE(d.Ok()) << d.detail;
  EXPECT_EQ(std::get<Hello>(d.message).job_id.size(), 255u);
}

// Names go on to the status API and metrics labels: a string that is not UTF-8 is refused and
// the field named, whatever message carries it.
TEST(ProtocolReject, StringsThatAreNotUtf8) {
  for (const std::string& bad : {std::string("a\x87"
                                             "b"),
                                 std::string("\xc0\xaf"), std::string("\xed\xa0\x80"),
                                 std::string("\xf4\x90\x80\x80"), std::string("\xe2\x82")}) {
    Hello h;
    h.job_id = bad;
    h.node = std::string(1, 'n');  // (GCC 12 warns wrongly of overlap on `= "n"` here)
    h.world_size = 1;
    Decoded d = Decode(Encode(h));
    EXPECT_EQ(d.error, DecodeError::kBadField);
    EXPECT_NE(d.detail.find("'job_id' is not UTF-8"), std::string::npos) << d.detail;
    Bye b;
    b.job_id = "j";
    b.reason = bad;
    d = Decode(Encode(b));
    EXPECT_EQ(d.error, DecodeError::kBadField);
    EXPECT_NE(d.detail.find("'reason'"), std::string::npos) << d.detail;
  }
}

TEST(Protocol, AcceptsExtraTrailingFieldsFromNewerPeers) {
  std::string bytes;
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(3);
  pk.pack(kProtocolVersion);
  pk.pack(static_cast<uint32_t>(MessageType::kClockPing));
  pk.pack_array(3);
  pk.pack(7);
  pk.pack(100);
  pk.pack("a field from the future");
  const Decoded d = Decode(buf.data(), buf.size());
  ASSERT_TRUE(d.Ok()) << d.detail;
  EXPECT_EQ(std::get<ClockPing>(d.message).seq, 7u);
}

// Builds [version, type, fields] with arbitrary pieces, for the negative tests.
template <typename Fn>
std::string Raw(uint32_t version, uint32_t type, Fn fields) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(3);
  pk.pack(version);
  pk.pack(type);
  fields(pk);
  return std::string(buf.data(), buf.size());
}

// The push's "no gate" flag: absent (a scheduler from before it) means gated; false makes the
// timetable always open whatever its window said; an always-open timetable is never "gated";
// anything but 0 or 1 is rejected and names the field.
TEST(Protocol, TimetablePushSaysNoGateExplicitly) {
  const auto raw = [](int fields, int64_t window, uint32_t gated) {
    return Raw(kProtocolVersion, static_cast<uint32_t>(MessageType::kTimetablePush), [&](auto& pk) {
      pk.pack_array(static_cast<uint32_t>(fields));
      pk.pack(std::string("j"));
      pk.pack(3);            // version
      pk.pack(0);            // epoch
      pk.pack(400'000'000);  // period
      pk.pack(5'000'000);    // offset
      pk.pack(window);
      pk.pack(1'000'000);    // late slack
      pk.pack(100'000'000);  // max wait
      if (fields > 8) pk.pack(gated);
    });
  };
  Decoded d = Decode(raw(8, 120'000'000, 0));
  ASSERT_TRUE(d.Ok()) << d.detail;
  EXPECT_FALSE(AlwaysOpen(std::get<TimetablePush>(d.message).timetable));
  EXPECT_EQ(std::get<TimetablePush>(d.message).timetable.window_ns, 120'000'000);

  d = Decode(raw(9, 120'000'000, 1));
  ASSERT_TRUE(d.Ok()) << d.detail;
  EXPECT_EQ(std::get<TimetablePush>(d.message).timetable.window_ns, 120'000'000);

  d = Decode(raw(9, 120'000'000, 0));  // "no gate", whatever the window says
  ASSERT_TRUE(d.Ok()) << d.detail;
  const auto& open = std::get<TimetablePush>(d.message);
  EXPECT_TRUE(AlwaysOpen(open.timetable));
  EXPECT_EQ(open.timetable.window_ns, 400'000'000);
  EXPECT_EQ(open.timetable.late_slack_ns, 0);
  EXPECT_EQ(open.timetable.max_wait_ns, 0);
  EXPECT_EQ(open.timetable.version, 3u);

  d = Decode(raw(8, 400'000'000, 1));  // an old scheduler's degenerate window: open as well
  ASSERT_TRUE(d.Ok()) << d.detail;
  EXPECT_TRUE(AlwaysOpen(std::get<TimetablePush>(d.message).timetable));

  d = Decode(raw(9, 120'000'000, 2));
  EXPECT_EQ(d.error, DecodeError::kBadField);
  EXPECT_NE(d.detail.find("'gated'"), std::string::npos) << d.detail;

  // The encoder's flag is the push's last byte (a msgpack fixint): 0 for an always-open
  // timetable, 1 for a gate.
  TimetablePush none;
  none.job_id = "j";
  none.timetable = {4, 0, 400'000'000, 0, 400'000'000, 0, 0};
  const std::string bytes = Encode(none);
  EXPECT_EQ(bytes.back(), '\0');
  d = Decode(bytes);
  ASSERT_TRUE(d.Ok()) << d.detail;
  EXPECT_TRUE(AlwaysOpen(std::get<TimetablePush>(d.message).timetable));
  EXPECT_EQ(Encode(d.message), bytes);
  none.timetable.window_ns = 100'000'000;
  EXPECT_EQ(Encode(none).back(), '\x01');

  // An always-open timetable that still carries a slack and a wait (here a degenerate period of
  // 0, which only the receiver's ValidateTimetable rejects) is encoded as the decoder reads it
  // back, so one round trip gives bytes that every later one repeats (found by the fuzzer).
  TimetablePush leftover;
  leftover.job_id = "j";
  leftover.timetable = {1, 0, 0, 57, 0, 0, 2};
  const std::string first = Encode(leftover);
  d = Decode(first);
  ASSERT_TRUE(d.Ok()) << d.detail;
  EXPECT_EQ(std::get<TimetablePush>(d.message).timetable.max_wait_ns, 0);
  EXPECT_EQ(Encode(d.message), first);
}

TEST(Protocol, TimetablePushCarriesItsYieldsAndLeavesThemOutWhenNone) {
  const TimetablePush with = std::get<TimetablePush>(OneOfEach()[5]);
  const Decoded d = Decode(Encode(with));
  ASSERT_TRUE(d.Ok()) << d.detail;
  const TimetablePush& got = std::get<TimetablePush>(d.message);
  EXPECT_EQ(got.yields.count, 3u);
  EXPECT_EQ(got.yields.epoch_ns, with.timetable.epoch_ns);  // the timetable's, not on the wire
  EXPECT_EQ(got.yields.windows[1].period_ns, 517'000'000);
  EXPECT_EQ(got.yields.tolerance_ns, 4'000'000);
  EXPECT_EQ(got.yields.allowance_ns, 5'000'000);
  EXPECT_GT(got.yields.windows[1].inv_period, 0.0);  // validated: ready for the gate
  // Five fields on the wire; a sixth (a newer peer's field) is ignored.
  const std::string five = Encode(with);
  const msgpack::object_handle h5 = msgpack::unpack(five.data(), five.size());
  EXPECT_EQ(h5.get().via.array.ptr[2].via.array.ptr[9].via.array.size, 5u);
  msgpack::zone zone;
  msgpack::object six(h5.get(), zone);
  msgpack::object& set = six.via.array.ptr[2].via.array.ptr[9];
  auto* fields = static_cast<msgpack::object*>(zone.allocate_align(6 * sizeof(msgpack::object)));
  std::copy(set.via.array.ptr, set.via.array.ptr + 5, fields);
  fields[5] = msgpack::object(uint64_t{4} << 20);
  set.via.array.ptr = fields;
  set.via.array.size = 6;
  msgpack::sbuffer sb;
  msgpack::pack(sb, six);
  const Decoded d6 = Decode(std::string(sb.data(), sb.size()));
  ASSERT_TRUE(d6.Ok()) << d6.detail;
  EXPECT_EQ(std::get<TimetablePush>(d6.message).yields, got.yields);
  // No allowance: four fields, as a peer from before allowances sends and reads them.
  TimetablePush no_allowance = with;
  no_allowance.yields.allowance_ns = 0;
  const std::string four = Encode(no_allowance);
  const msgpack::object_handle h4 = msgpack::unpack(four.data(), four.size());
  EXPECT_EQ(h4.get().via.array.ptr[2].via.array.ptr[9].via.array.size, 4u);
  EXPECT_EQ(std::get<TimetablePush>(Decode(four).message).yields.allowance_ns, 0);
  // No yields: the push is what it was before yields existed (nine fields).
  TimetablePush none = with;
  none.yields = YieldSet{};
  const std::string bytes = Encode(none);
  const msgpack::object_handle h = msgpack::unpack(bytes.data(), bytes.size());
  EXPECT_EQ(h.get().via.array.ptr[2].via.array.size, 9u);
  EXPECT_EQ(std::get<TimetablePush>(Decode(bytes).message).yields.count, 0u);
}

TEST(ProtocolReject, YieldSetsTheGateCannotUse) {
  // The push's nine fields, then a yields field built by `yields`.
  auto push = [](auto yields) {
    return Raw(kProtocolVersion, 6, [&](auto& pk) {
      pk.pack_array(10);
      pk.pack(std::string("j"));
      pk.pack(1);
      pk.pack(int64_t{1'700'000'000'000'000'000});
      pk.pack(400'000'000);
      pk.pack(0);
      pk.pack(100'000'000);
      pk.pack(0);
      pk.pack(100'000'000);
      pk.pack(1);
      yields(pk);
    });
  };
  auto windows = [](auto& pk, uint32_t n, int64_t period, int64_t window) {
    pk.pack_array(4);
    pk.pack(50'000'000);
    pk.pack(300'000'000);
    pk.pack(0);
    pk.pack_array(n);
    for (uint32_t i = 0; i < n; ++i) {
      pk.pack_array(3);
      pk.pack(period);
      pk.pack(0);
      pk.pack(window);
    }
  };
  EXPECT_TRUE(Decode(push([&](auto& pk) { windows(pk, 16, 280'000'000, 80'000'000); })).Ok());
  const std::vector<std::pair<const char*, std::string>> bad = {
      {"17 windows", push([&](auto& pk) { windows(pk, 17, 280'000'000, 80'000'000); })},
      {"no gap", push([&](auto& pk) { windows(pk, 1, 280'000'000, 280'000'000); })},
      {"no window", push([&](auto& pk) { windows(pk, 1, 280'000'000, 0); })},
      {"period 10 ns", push([&](auto& pk) { windows(pk, 1, 10, 5); })},
      {"not an array", push([](auto& pk) { pk.pack(7); })},
      {"short", push([](auto& pk) {
         pk.pack_array(2);
         pk.pack(1);
         pk.pack(2);
       })},
      {"window of two", push([](auto& pk) {
         pk.pack_array(4);
         pk.pack(1);
         pk.pack(2);
         pk.pack(0);
         pk.pack_array(1);
         pk.pack_array(2);
         pk.pack(280'000'000);
         pk.pack(0);
       })},
      {"negative allowance", push([](auto& pk) {
         pk.pack_array(5);
         pk.pack(1);
         pk.pack(2);
         pk.pack(0);
         pk.pack_array(0);
         pk.pack(-1);
       })},
      {"allowance not a number", push([](auto& pk) {
         pk.pack_array(5);
         pk.pack(1);
         pk.pack(2);
         pk.pack(0);
         pk.pack_array(0);
         pk.pack(std::string("x"));
       })},
      {"negative need", push([](auto& pk) {
         pk.pack_array(4);
         pk.pack(-1);
         pk.pack(2);
         pk.pack(0);
         pk.pack_array(0);
       })},
  };
  for (const auto& [what, bytes] : bad) {
    const Decoded d = Decode(bytes);
    EXPECT_EQ(d.error, DecodeError::kBadField) << what;
    EXPECT_NE(d.detail.find("'yields'"), std::string::npos) << what << ": " << d.detail;
  }
}

TEST(ProtocolReject, EmptyAndOversized) {
  EXPECT_EQ(Decode("", 0).error, DecodeError::kEmpty);
  const std::string big(kMaxMessageBytes + 1, '\x90');
  EXPECT_EQ(Decode(big).error, DecodeError::kTooLarge);
}

TEST(ProtocolReject, EveryTruncationOfEveryMessage) {
  for (const Message& m : OneOfEach()) {
    const std::string bytes = Encode(m);
    for (size_t n = 1; n < bytes.size(); ++n) {
      const Decoded d = Decode(bytes.data(), n);
      EXPECT_EQ(d.error, DecodeError::kMalformed) << TypeName(TypeOf(m)) << " cut at " << n;
    }
  }
}

TEST(ProtocolReject, TrailingGarbage) {
  std::string bytes = Encode(Bye{"j", 0, ""});
  bytes.push_back('\x01');
  EXPECT_EQ(Decode(bytes).error, DecodeError::kTrailingBytes);
}

TEST(ProtocolReject, NotAnEnvelope) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, std::string("hello"));
  EXPECT_EQ(Decode(buf.data(), buf.size()).error, DecodeError::kBadEnvelope);
  const std::string fields_not_array =
      Raw(kProtocolVersion, 3, [](auto& pk) { pk.pack(std::string("x")); });
  EXPECT_EQ(Decode(fields_not_array).error, DecodeError::kBadEnvelope);
}

TEST(ProtocolReject, WrongVersion) {
  const std::string v2 = Raw(2, 3, [](auto& pk) {
    pk.pack_array(2);
    pk.pack(1);
    pk.pack(2);
  });
  const Decoded d = Decode(v2);
  EXPECT_EQ(d.error, DecodeError::kVersion);
  EXPECT_NE(d.detail.find("version 2"), std::string::npos);
}

using Packer = msgpack::packer<msgpack::sbuffer>;

TEST(ProtocolReject, TurnsTheGateCannotUse) {
  auto push = [](const std::function<void(Packer&)>& partners, int64_t wire = 10'000'000) {
    return Raw(kProtocolVersion, static_cast<uint32_t>(MessageType::kTurnPush), [&](auto& pk) {
      pk.pack_array(6);
      pk.pack(std::string("j"));
      pk.pack(1);
      pk.pack(0);
      pk.pack(wire);
      pk.pack(int64_t{50'000'000});
      partners(pk);
    });
  };
  auto one = [](int64_t wire, int64_t compute, uint32_t higher = 0) {
    return [=](Packer& pk) {
      pk.pack_array(1);
      pk.pack_array(4);
      pk.pack(7);
      pk.pack(higher);
      pk.pack(wire);
      pk.pack(compute);
    };
  };
  EXPECT_TRUE(Decode(push(one(5'000'000, 20'000'000))).Ok());
  for (const std::string& bad :
       {push(one(0, 20'000'000)), push(one(5'000'000, -1)), push(one(5'000'000, 1, 2)),
        push(one(5'000'000, 1), 0), push(one(int64_t{4'000'000'000'000}, 1)),
        push([](Packer& pk) { pk.pack(3); }), push([](Packer& pk) {
          pk.pack_array(5);
          for (int i = 0; i < 5; ++i) {
            pk.pack_array(4);
            pk.pack(i);
            pk.pack(0);
            pk.pack(1'000'000);
            pk.pack(1'000'000);
          }
        }),
        push([](Packer& pk) {
          pk.pack_array(1);
          pk.pack_array(3);
          pk.pack(1);
          pk.pack(0);
          pk.pack(1);
        })}) {
    const Decoded d = Decode(bad);
    EXPECT_EQ(d.error, DecodeError::kBadField) << d.detail;
  }
  // Edges at times that are not times, and flags that are not flags.
  for (const Message& m :
       {Message{PhaseEdge{"j", 0, true, 0}}, Message{TurnEdge{"j", 1, true, -5}}}) {
    EXPECT_EQ(Decode(Encode(m)).error, DecodeError::kBadField) << TypeName(TypeOf(m));
  }
  const std::string flag =
      Raw(kProtocolVersion, static_cast<uint32_t>(MessageType::kTurnEdge), [](auto& pk) {
        pk.pack_array(4);
        pk.pack(std::string("j"));
        pk.pack(1);
        pk.pack(2);
        pk.pack(5);
      });
  EXPECT_EQ(Decode(flag).error, DecodeError::kBadField);
}

TEST(ProtocolReject, UnknownType) {
  const std::string t = Raw(kProtocolVersion, 99, [](auto& pk) { pk.pack_array(0); });
  EXPECT_EQ(Decode(t).error, DecodeError::kUnknownType);
}

TEST(ProtocolReject, WrongFieldTypesMissingFieldsAndRanges) {
  // seq as a string
  Decoded d = Decode(Raw(kProtocolVersion, 3, [](auto& pk) {
    pk.pack_array(2);
    pk.pack(std::string("seven"));
    pk.pack(1);
  }));
  EXPECT_EQ(d.error, DecodeError::kBadField);
  EXPECT_NE(d.detail.find("'seq'"), std::string::npos) << d.detail;

  // a ping with one field
  d = Decode(Raw(kProtocolVersion, 3, [](auto& pk) {
    pk.pack_array(1);
    pk.pack(1);
  }));
  EXPECT_EQ(d.error, DecodeError::kBadField);
  EXPECT_NE(d.detail.find("missing"), std::string::npos) << d.detail;

  // hello whose rank is not below world_size; and a negative rank
  Hello h;
  h.job_id = "j";
  h.rank = 4;
  h.world_size = 4;
  d = Decode(Encode(h));
  EXPECT_EQ(d.error, DecodeError::kBadField);
  d = Decode(Raw(kProtocolVersion, 1, [](auto& pk) {
    pk.pack_array(8);
    pk.pack(std::string("j"));
    pk.pack(std::string("n"));
    pk.pack(-1);
    pk.pack(4);
    pk.pack(1);
    pk.pack(1);
    pk.pack(1);
    pk.pack(std::string("v"));
  }));
  EXPECT_EQ(d.error, DecodeError::kBadField);
  EXPECT_NE(d.detail.find("'rank'"), std::string::npos) << d.detail;

  // empty job id
  d = Decode(Encode(Bye{"", 0, ""}));
  EXPECT_EQ(d.error, DecodeError::kBadField);

  // a 32-bit field holding a 64-bit value
  d = Decode(Raw(kProtocolVersion, 2, [](auto& pk) {
    pk.pack_array(3);
    pk.pack(1);
    pk.pack(uint64_t{1} << 40);
    pk.pack(0);
  }));
  EXPECT_EQ(d.error, DecodeError::kBadField);

  // confidence out of [0, 1] and NaN
  ProfileReport rep;
  rep.job_id = "j";
  rep.confidence = 3.0;
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kBadField);
  rep.confidence = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kBadField);
  rep.confidence = 0.5;
  rep.period_ns = 100;
  rep.hold_ns = 101;  // a hold longer than the period
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kBadField);
  rep.hold_ns = 0;
  rep.jitter_ns = -1;
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kBadField);
  rep.jitter_ns = 101;  // varies by more than the period
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kBadField);
  rep.jitter_ns = 0;
  rep.compute_ns = 101;  // computes longer than the period
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kBadField);
  rep.compute_ns = 0;
  // Figures whose wire time at a link's pace would overflow the planner's nanoseconds.
  rep.period_ns = TimetableLimits{}.max_period_ns + 1;
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kBadField);
  rep.period_ns = 100;
  rep.comm_ns = TimetableLimits{}.max_period_ns + 1;
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kBadField);
  rep.comm_ns = 0;
  rep.bytes_per_phase = kMaxBytesPerPhase + 1;
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kBadField);
  rep.bytes_per_phase = kMaxBytesPerPhase;
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kNone);
  rep.bytes_per_phase = 0;
  // A clock error bound or a phase start whose sums would overflow (INT64_MAX as "unknown").
  rep.clock_error_ns = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kBadField);
  rep.clock_error_ns = -1;  // no estimate
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kNone);
  rep.phase_starts_ns = {1'000, std::numeric_limits<int64_t>::max() - 1};
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kBadField);
  rep.phase_starts_ns = {-5};
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kBadField);
  rep.phase_starts_ns = {1'800'000'000'000'000'000};  // 2027
  EXPECT_EQ(Decode(Encode(rep)).error, DecodeError::kNone);
  rep.phase_starts_ns.clear();

  // unknown error code
  d = Decode(Raw(kProtocolVersion, 8, [](auto& pk) {
    pk.pack_array(2);
    pk.pack(999);
    pk.pack(std::string("?"));
  }));
  EXPECT_EQ(d.error, DecodeError::kBadField);
}

TEST(ProtocolReject, HostileNestingAndDeclaredSizes) {
  // 100 nested arrays: beyond the depth limit.
  std::string deep(100, '\x91');
  deep.push_back('\x00');
  EXPECT_EQ(Decode(deep).error, DecodeError::kMalformed);
  // An array declaring 2^32-1 elements in 5 bytes.
  const std::string huge_array("\xdd\xff\xff\xff\xff", 5);
  EXPECT_EQ(Decode(huge_array).error, DecodeError::kMalformed);
  // A string declaring 4 GiB.
  const std::string huge_str("\xdb\xff\xff\xff\xff", 5);
  EXPECT_EQ(Decode(huge_str).error, DecodeError::kMalformed);
  // A reserved msgpack byte.
  EXPECT_EQ(Decode("\xc1", 1).error, DecodeError::kMalformed);
}

TEST(ProtocolReject, RandomBytesNeverCrashAndRarelyDecode) {
  std::mt19937_64 rng(7);
  int decoded = 0;
  for (int i = 0; i < 100'000; ++i) {
    std::string b(1 + rng() % 64, '\0');
    for (auto& c : b) c = static_cast<char>(rng());
    const Decoded d = Decode(b);
    if (d.Ok()) {
      ++decoded;
    } else {
      EXPECT_FALSE(d.detail.empty());
    }
  }
  EXPECT_LT(decoded, 10);
}

TEST(ProtocolReject, MutatedValidMessagesAreRejectedOrStillValid) {
  std::mt19937_64 rng(11);
  const auto msgs = OneOfEach();
  for (int i = 0; i < 50'000; ++i) {
    std::string b = Encode(msgs[rng() % msgs.size()]);
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<char>(rng());
    const Decoded d = Decode(b);
    // Whatever the decoder accepts is a valid message: it survives its own round trip.
    if (d.Ok()) {
      const Decoded again = Decode(Encode(d.message));
      ASSERT_TRUE(again.Ok()) << again.detail;
    } else {
      EXPECT_FALSE(d.detail.empty());
    }
  }
}

}  // namespace
}  // namespace metronome::proto
