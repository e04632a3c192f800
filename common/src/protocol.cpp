#include "metronome/common/protocol.hpp"

#include <msgpack.hpp>

#include <exception>
#include <limits>
#include <string_view>
#include <type_traits>

#include "metronome/common/utf8.hpp"

namespace metronome::proto {
namespace {

// ---------------------------------------------------------------------------------------------
// Encoding

// msgpack's packer writes into anything with write(const char*, size_t).
struct StringSink {
  std::string* out;
  // NOLINTNEXTLINE(readability-identifier-naming): msgpack::packer calls write().
  void write(const char* p, size_t n) { out->append(p, n); }
};
using Packer = msgpack::packer<StringSink>;

void PackStr(Packer& pk, const std::string& s) {
  size_t n = s.size() < kMaxStringBytes ? s.size() : kMaxStringBytes;
  // Cut where a character starts, so that a UTF-8 name stays UTF-8 (the decoder checks it).
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  pk.pack_str(static_cast<uint32_t>(n));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(n));
}

void PackFields(Packer& pk, const Hello& m) {
  // The pod fields up to the last one set (all of them before features): a hello without them
  // is as older shims send it.
  const uint32_t pod_fields = m.features != 0 || !m.pod_uid.empty() ? 3
                              : !m.pod_name.empty()                 ? 2
                              : !m.pod_namespace.empty()            ? 1
                                                                    : 0;
  pk.pack_array(8 + pod_fields + (m.features != 0 ? 1 : 0));
  PackStr(pk, m.job_id);
  PackStr(pk, m.node);
  pk.pack(m.rank);
  pk.pack(m.world_size);
  pk.pack(m.priority);
  pk.pack(m.pid);
  pk.pack(m.nccl_version);
  PackStr(pk, m.shim_version);
  const std::string* pod[] = {&m.pod_namespace, &m.pod_name, &m.pod_uid};
  for (uint32_t i = 0; i < pod_fields; ++i) PackStr(pk, *pod[i]);
  if (m.features != 0) pk.pack(m.features);
}

void PackFields(Packer& pk, const Welcome& m) {
  pk.pack_array(m.features != 0 ? 4 : 3);
  pk.pack(m.session);
  pk.pack(m.report_interval_ms);
  pk.pack(m.server_time_ns);
  if (m.features != 0) pk.pack(m.features);
}

void PackFields(Packer& pk, const ClockPing& m) {
  pk.pack_array(2);
  pk.pack(m.seq);
  pk.pack(m.t1_ns);
}

void PackFields(Packer& pk, const ClockPong& m) {
  pk.pack_array(4);
  pk.pack(m.seq);
  pk.pack(m.t1_ns);
  pk.pack(m.t2_ns);
  pk.pack(m.t3_ns);
}

void PackFields(Packer& pk, const ProfileReport& m) {
  pk.pack_array(21);
  PackStr(pk, m.job_id);
  pk.pack(m.rank);
  pk.pack(m.iterations);
  pk.pack(m.period_ns);
  pk.pack(m.comm_ns);
  pk.pack(m.bytes_per_phase);
  pk.pack(m.collectives_per_phase);
  pk.pack(m.confidence);
  pk.pack(m.clock_offset_ns);
  pk.pack(m.clock_error_ns);
  pk.pack(m.timetable_version);
  pk.pack(m.gated);
  pk.pack(m.late);
  pk.pack(m.failed_open);
  const size_t n =
      m.phase_starts_ns.size() < kMaxPhaseStarts ? m.phase_starts_ns.size() : kMaxPhaseStarts;
  // Keep the most recent starts when truncating.
  pk.pack_array(static_cast<uint32_t>(n));
  for (size_t i = m.phase_starts_ns.size() - n; i < m.phase_starts_ns.size(); ++i) {
    pk.pack(m.phase_starts_ns[i]);
  }
  pk.pack(m.hold_ns);
  pk.pack(m.jitter_ns);
  pk.pack(m.compute_ns);
  pk.pack(m.realigned);
  pk.pack(m.yielded);
  pk.pack(m.yield_wait_ns);
}

void PackFields(Packer& pk, const TimetablePush& m) {
  const YieldSet& y = m.yields;
  pk.pack_array(y.count > 0 ? 10 : 9);
  PackStr(pk, m.job_id);
  pk.pack(m.timetable.version);
  pk.pack(m.timetable.epoch_ns);
  pk.pack(m.timetable.period_ns);
  pk.pack(m.timetable.offset_ns);
  // An always-open timetable goes out as the decoder reads "no gate" back (window = period, no
  // slack, no wait), so that decoding what was encoded gives the same message whatever the
  // fields it carried before.
  const bool open = AlwaysOpen(m.timetable);
  pk.pack(open ? m.timetable.period_ns : m.timetable.window_ns);
  pk.pack(open ? int64_t{0} : m.timetable.late_slack_ns);
  pk.pack(open ? int64_t{0} : m.timetable.max_wait_ns);
  pk.pack(static_cast<uint32_t>(open ? 0 : 1));  // the explicit "no gate"
  // [need, max_wait, tolerance, [[period, offset, window], ...], allowance] (the timetable's
  // epoch); absent when there is nothing to yield to, so that such a push is what it was before
  // yields, and the allowance left out when it is 0, so that such a set is what it was before
  // allowances. A decoder reads the first five and ignores what follows (a peer of a newer
  // version may send more).
  if (y.count == 0) return;
  const uint32_t n = y.count < kMaxYieldWindows ? y.count : kMaxYieldWindows;
  pk.pack_array(y.allowance_ns != 0 ? 5 : 4);
  pk.pack(y.need_ns);
  pk.pack(y.max_wait_ns);
  pk.pack(y.tolerance_ns);
  pk.pack_array(n);
  for (uint32_t i = 0; i < n; ++i) {
    pk.pack_array(3);
    pk.pack(y.windows[i].period_ns);
    pk.pack(y.windows[i].offset_ns);
    pk.pack(y.windows[i].window_ns);
  }
  if (y.allowance_ns != 0) pk.pack(y.allowance_ns);
}

void PackFields(Packer& pk, const Bye& m) {
  pk.pack_array(3);
  PackStr(pk, m.job_id);
  pk.pack(m.rank);
  PackStr(pk, m.reason);
}

void PackFields(Packer& pk, const PhaseEdge& m) {
  pk.pack_array(4);
  PackStr(pk, m.job_id);
  pk.pack(m.rank);
  pk.pack(static_cast<uint32_t>(m.begun ? 1 : 0));
  pk.pack(m.at_ns);
}

void PackFields(Packer& pk, const TurnPush& m) {
  const TurnSet& t = m.turns;
  const uint32_t n = t.count < kMaxTurnPartners ? t.count : kMaxTurnPartners;
  pk.pack_array(6);
  PackStr(pk, m.job_id);
  pk.pack(m.version);
  pk.pack(static_cast<uint32_t>(m.send_edges ? 1 : 0));
  pk.pack(n > 0 ? t.wire_ns : int64_t{0});
  pk.pack(n > 0 ? t.period_ns : int64_t{0});
  pk.pack_array(n);
  for (uint32_t i = 0; i < n; ++i) {
    const TurnPartner& p = t.partners[i];
    pk.pack_array(4);
    pk.pack(p.job);
    pk.pack(static_cast<uint32_t>(p.higher ? 1 : 0));
    pk.pack(p.wire_ns);
    pk.pack(p.compute_ns);
  }
}

void PackFields(Packer& pk, const TurnEdge& m) {
  pk.pack_array(4);
  PackStr(pk, m.job_id);
  pk.pack(m.partner);
  pk.pack(static_cast<uint32_t>(m.begun ? 1 : 0));
  pk.pack(m.at_ns);
}

void PackFields(Packer& pk, const Error& m) {
  pk.pack_array(2);
  pk.pack(static_cast<uint32_t>(m.code));
  PackStr(pk, m.message);
}

// ---------------------------------------------------------------------------------------------
// Decoding

// Reads positional fields out of a msgpack array, checking each one's type and range. The first
// failure is recorded in `out` and every later read fails fast.
class FieldReader {
 public:
  FieldReader(const msgpack::object_array& fields, Decoded& out) : f_(fields), out_(out) {}

  bool Str(const char* name, std::string& v, bool required_non_empty = false) {
    const msgpack::object* o = Next(name);
    if (o == nullptr) return false;
    if (o->type != msgpack::type::STR) return Fail(name, "is not a string");
    if (o->via.str.size > kMaxStringBytes) return Fail(name, "is longer than 256 bytes");
    if (required_non_empty && o->via.str.size == 0) return Fail(name, "is empty");
    // Names go on to the status API and metrics labels (JSON, Prometheus text): UTF-8 only.
    if (!IsUtf8(std::string_view(o->via.str.ptr, o->via.str.size))) {
      return Fail(name, "is not UTF-8");
    }
    v.assign(o->via.str.ptr, o->via.str.size);
    return true;
  }

  // A trailing field that older peers do not send: absent leaves `v` as it is.
  bool OptionalStr(const char* name, std::string& v) {
    if (out_.error != DecodeError::kNone) return false;
    if (i_ >= f_.size) return true;
    return Str(name, v);
  }

  template <typename T>
  bool OptionalInt(const char* name, T& v) {
    if (out_.error != DecodeError::kNone) return false;
    if (i_ >= f_.size) return true;
    return Int(name, v);
  }

  // A trailing yield set (absent: none), as TimetablePush encodes it, checked by
  // ValidateYieldSet against `epoch_ns`.
  bool OptionalYields(const char* name, YieldSet& y, int64_t epoch_ns) {
    if (out_.error != DecodeError::kNone) return false;
    if (i_ >= f_.size) return true;
    const msgpack::object* o = Next(name);
    if (o->type != msgpack::type::ARRAY || o->via.array.size < 4) {
      return Fail(name, "is not [need, max_wait, tolerance, windows, (allowance)]");
    }
    const msgpack::object* f = o->via.array.ptr;
    if (!(ConvertInt(name, f[0], y.need_ns) && ConvertInt(name, f[1], y.max_wait_ns) &&
          ConvertInt(name, f[2], y.tolerance_ns))) {
      return false;
    }
    y.allowance_ns = 0;
    if (o->via.array.size >= 5 && !ConvertInt(name, f[4], y.allowance_ns)) return false;
    if (f[3].type != msgpack::type::ARRAY) return Fail(name, "has no window list");
    if (f[3].via.array.size > kMaxYieldWindows) return Fail(name, "has more than 16 windows");
    y.count = f[3].via.array.size;
    for (uint32_t i = 0; i < y.count; ++i) {
      const msgpack::object& w = f[3].via.array.ptr[i];
      if (w.type != msgpack::type::ARRAY || w.via.array.size != 3) {
        return Fail(name, "has a window that is not [period, offset, window]");
      }
      if (!(ConvertInt(name, w.via.array.ptr[0], y.windows[i].period_ns) &&
            ConvertInt(name, w.via.array.ptr[1], y.windows[i].offset_ns) &&
            ConvertInt(name, w.via.array.ptr[2], y.windows[i].window_ns))) {
        return false;
      }
    }
    y.epoch_ns = epoch_ns;
    if ((ValidateYieldSet(y) & kYieldRejectMask) != 0) {
      return Fail(name, "has a period, window, need, tolerance or allowance out of range");
    }
    return true;
  }

  // A turn set's figures and partners, as TurnPush encodes them, checked by ValidateTurnSet
  // (an empty list: no turns, figures ignored).
  bool Turns(TurnSet& t) {
    if (!(Int("wire_ns", t.wire_ns) && Int("period_ns", t.period_ns))) return false;
    const msgpack::object* o = Next("partners");
    if (o == nullptr) return false;
    if (o->type != msgpack::type::ARRAY) return Fail("partners", "is not an array");
    if (o->via.array.size > kMaxTurnPartners) return Fail("partners", "has more than 4 partners");
    t.count = o->via.array.size;
    for (uint32_t i = 0; i < t.count; ++i) {
      const msgpack::object& p = o->via.array.ptr[i];
      if (p.type != msgpack::type::ARRAY || p.via.array.size != 4) {
        return Fail("partners", "has one that is not [job, higher, wire_ns, compute_ns]");
      }
      TurnPartner& tp = t.partners[i];
      bool higher = false;
      if (!(ConvertInt("partners", p.via.array.ptr[0], tp.job) &&
            ConvertFlag("partners", p.via.array.ptr[1], higher) &&
            ConvertInt("partners", p.via.array.ptr[2], tp.wire_ns) &&
            ConvertInt("partners", p.via.array.ptr[3], tp.compute_ns))) {
        return false;
      }
      tp.higher = higher;
    }
    if (t.count == 0) {
      t = TurnSet{};
      return true;
    }
    if (ValidateTurnSet(t) != kTurnOk) {
      return Fail("partners", "has a wire time, compute or period out of range");
    }
    return true;
  }

  bool Flag(const char* name, bool& v) {
    const msgpack::object* o = Next(name);
    if (o == nullptr) return false;
    return ConvertFlag(name, *o, v);
  }

  template <typename T>
  bool Int(const char* name, T& v) {
    static_assert(std::is_integral_v<T>);
    const msgpack::object* o = Next(name);
    if (o == nullptr) return false;
    return ConvertInt(name, *o, v);
  }

  bool F64(const char* name, double& v) {
    const msgpack::object* o = Next(name);
    if (o == nullptr) return false;
    switch (o->type) {
      case msgpack::type::FLOAT32:
      case msgpack::type::FLOAT64:
        v = o->via.f64;
        return true;
      case msgpack::type::POSITIVE_INTEGER:
        v = static_cast<double>(o->via.u64);
        return true;
      case msgpack::type::NEGATIVE_INTEGER:
        v = static_cast<double>(o->via.i64);
        return true;
      default:
        return Fail(name, "is not a number");
    }
  }

  bool I64List(const char* name, std::vector<int64_t>& v, size_t max) {
    const msgpack::object* o = Next(name);
    if (o == nullptr) return false;
    if (o->type != msgpack::type::ARRAY) return Fail(name, "is not an array");
    if (o->via.array.size > max) return Fail(name, "has too many elements");
    v.resize(o->via.array.size);
    for (uint32_t i = 0; i < o->via.array.size; ++i) {
      if (!ConvertInt(name, o->via.array.ptr[i], v[i])) return false;
    }
    return true;
  }

  bool Fail(const char* name, const char* what) {
    if (out_.error == DecodeError::kNone) {
      out_.error = DecodeError::kBadField;
      out_.detail = std::string("field '") + name + "' " + what;
    }
    return false;
  }

 private:
  const msgpack::object* Next(const char* name) {
    if (out_.error != DecodeError::kNone) return nullptr;
    if (i_ >= f_.size) {
      Fail(name, "is missing");
      return nullptr;
    }
    return &f_.ptr[i_++];
  }

  // 0 or 1, as the encoder writes a flag.
  bool ConvertFlag(const char* name, const msgpack::object& o, bool& v) {
    uint32_t x = 0;
    if (!ConvertInt(name, o, x)) return false;
    if (x > 1) return Fail(name, "is not 0 or 1");
    v = x == 1;
    return true;
  }

  template <typename T>
  bool ConvertInt(const char* name, const msgpack::object& o, T& v) {
    if (o.type == msgpack::type::POSITIVE_INTEGER) {
      if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        return Fail(name, "is out of range");
      }
      v = static_cast<T>(o.via.u64);
      return true;
    }
    if (o.type == msgpack::type::NEGATIVE_INTEGER) {
      if constexpr (std::is_unsigned_v<T>) {
        return Fail(name, "is negative");
      } else {
        if (o.via.i64 < static_cast<int64_t>(std::numeric_limits<T>::min())) {
          return Fail(name, "is out of range");
        }
        v = static_cast<T>(o.via.i64);
        return true;
      }
    }
    return Fail(name, "is not an integer");
  }

  const msgpack::object_array& f_;
  Decoded& out_;
  uint32_t i_ = 0;
};

bool ParseFields(FieldReader& r, Hello& m) {
  if (!(r.Str("job_id", m.job_id, true) && r.Str("node", m.node) && r.Int("rank", m.rank) &&
        r.Int("world_size", m.world_size) && r.Int("priority", m.priority) && r.Int("pid", m.pid) &&
        r.Int("nccl_version", m.nccl_version) && r.Str("shim_version", m.shim_version) &&
        r.OptionalStr("pod_namespace", m.pod_namespace) && r.OptionalStr("pod_name", m.pod_name) &&
        r.OptionalStr("pod_uid", m.pod_uid) && r.OptionalInt("features", m.features))) {
    return false;
  }
  if (m.world_size == 0) return r.Fail("world_size", "is zero");
  if (m.rank >= m.world_size) return r.Fail("rank", "is not below world_size");
  return true;
}

bool ParseFields(FieldReader& r, Welcome& m) {
  return r.Int("session", m.session) && r.Int("report_interval_ms", m.report_interval_ms) &&
         r.Int("server_time_ns", m.server_time_ns) && r.OptionalInt("features", m.features);
}

bool ParseFields(FieldReader& r, ClockPing& m) {
  return r.Int("seq", m.seq) && r.Int("t1_ns", m.t1_ns);
}

bool ParseFields(FieldReader& r, ClockPong& m) {
  return r.Int("seq", m.seq) && r.Int("t1_ns", m.t1_ns) && r.Int("t2_ns", m.t2_ns) &&
         r.Int("t3_ns", m.t3_ns);
}

bool ParseFields(FieldReader& r, ProfileReport& m) {
  if (!(r.Str("job_id", m.job_id, true) && r.Int("rank", m.rank) &&
        r.Int("iterations", m.iterations) && r.Int("period_ns", m.period_ns) &&
        r.Int("comm_ns", m.comm_ns) && r.Int("bytes_per_phase", m.bytes_per_phase) &&
        r.Int("collectives_per_phase", m.collectives_per_phase) &&
        r.F64("confidence", m.confidence) && r.Int("clock_offset_ns", m.clock_offset_ns) &&
        r.Int("clock_error_ns", m.clock_error_ns) &&
        r.Int("timetable_version", m.timetable_version) && r.Int("gated", m.gated) &&
        r.Int("late", m.late) && r.Int("failed_open", m.failed_open) &&
        r.I64List("phase_starts_ns", m.phase_starts_ns, kMaxPhaseStarts) &&
        r.OptionalInt("hold_ns", m.hold_ns) && r.OptionalInt("jitter_ns", m.jitter_ns) &&
        r.OptionalInt("compute_ns", m.compute_ns) && r.OptionalInt("realigned", m.realigned) &&
        r.OptionalInt("yielded", m.yielded) && r.OptionalInt("yield_wait_ns", m.yield_wait_ns))) {
    return false;
  }
  // Beyond these no job is periodic (TimetableLimits) and a phase's bytes at a link's pace would
  // overflow the planner's nanoseconds.
  if (m.period_ns < 0 || m.period_ns > TimetableLimits{}.max_period_ns) {
    return r.Fail("period_ns", "is not in [0, 1 h]");
  }
  if (m.hold_ns < 0 || m.hold_ns > m.period_ns) return r.Fail("hold_ns", "is not in [0, period]");
  if (m.comm_ns < 0 || m.comm_ns > TimetableLimits{}.max_period_ns) {
    return r.Fail("comm_ns", "is not in [0, 1 h]");
  }
  if (m.bytes_per_phase > kMaxBytesPerPhase) return r.Fail("bytes_per_phase", "is over 1 PiB");
  if (m.jitter_ns < 0 || m.jitter_ns > m.period_ns) {
    return r.Fail("jitter_ns", "is not in [0, period]");
  }
  if (m.compute_ns < 0 || m.compute_ns > m.period_ns) {
    return r.Fail("compute_ns", "is not in [0, period]");
  }
  if (m.yield_wait_ns < 0) return r.Fail("yield_wait_ns", "is negative");
  // A clock error bound beyond an hour is no estimate; sums with it would overflow.
  if (m.clock_error_ns > TimetableLimits{}.max_period_ns) {
    return r.Fail("clock_error_ns", "is over 1 h");
  }
  // Phase starts are times on the scheduler's clock: within the range the timetables keep
  // (so that a start plus a period cannot overflow).
  for (const int64_t s : m.phase_starts_ns) {
    if (s < 0 || s > TimetableLimits{}.max_abs_epoch_ns) {
      return r.Fail("phase_starts_ns", "has a start outside [0, 2^62] ns");
    }
  }
  if (!(m.confidence >= 0.0 && m.confidence <= 1.0)) {
    return r.Fail("confidence", "is not in [0, 1]");
  }
  return true;
}

bool ParseFields(FieldReader& r, TimetablePush& m) {
  Timetable& t = m.timetable;
  uint32_t gated = 1;
  if (!(r.Str("job_id", m.job_id, true) && r.Int("version", t.version) &&
        r.Int("epoch_ns", t.epoch_ns) && r.Int("period_ns", t.period_ns) &&
        r.Int("offset_ns", t.offset_ns) && r.Int("window_ns", t.window_ns) &&
        r.Int("late_slack_ns", t.late_slack_ns) && r.Int("max_wait_ns", t.max_wait_ns) &&
        r.OptionalInt("gated", gated) && r.OptionalYields("yields", m.yields, t.epoch_ns))) {
    return false;
  }
  if (gated > 1) return r.Fail("gated", "is not 0 or 1");
  if (gated == 0) {
    t.window_ns = t.period_ns;
    t.late_slack_ns = 0;
    t.max_wait_ns = 0;
  }
  return true;
}

bool ParseFields(FieldReader& r, Bye& m) {
  return r.Str("job_id", m.job_id, true) && r.Int("rank", m.rank) && r.Str("reason", m.reason);
}

bool ParseFields(FieldReader& r, PhaseEdge& m) {
  if (!(r.Str("job_id", m.job_id, true) && r.Int("rank", m.rank) && r.Flag("begun", m.begun) &&
        r.Int("at_ns", m.at_ns))) {
    return false;
  }
  if (m.at_ns <= 0) return r.Fail("at_ns", "is not positive");
  return true;
}

bool ParseFields(FieldReader& r, TurnPush& m) {
  return r.Str("job_id", m.job_id, true) && r.Int("version", m.version) &&
         r.Flag("send_edges", m.send_edges) && r.Turns(m.turns);
}

bool ParseFields(FieldReader& r, TurnEdge& m) {
  if (!(r.Str("job_id", m.job_id, true) && r.Int("partner", m.partner) &&
        r.Flag("begun", m.begun) && r.Int("at_ns", m.at_ns))) {
    return false;
  }
  if (m.at_ns <= 0) return r.Fail("at_ns", "is not positive");
  return true;
}

bool ParseFields(FieldReader& r, Error& m) {
  uint32_t code = 0;
  if (!(r.Int("code", code) && r.Str("message", m.message))) return false;
  if (code < static_cast<uint32_t>(ErrorCode::kMalformed) ||
      code > static_cast<uint32_t>(ErrorCode::kInternal)) {
    return r.Fail("code", "is not a known error code");
  }
  m.code = static_cast<ErrorCode>(code);
  return true;
}

template <typename T>
void ParseInto(const msgpack::object_array& fields, Decoded& out) {
  T m;
  FieldReader r(fields, out);
  if (ParseFields(r, m)) out.message = std::move(m);
}

Decoded Fail(DecodeError e, std::string detail) {
  Decoded d;
  d.error = e;
  d.detail = std::move(detail);
  return d;
}

Decoded DecodeUnchecked(const char* data, size_t size) {
  // A zone per thread, reused: decoding allocates nothing in the steady state.
  thread_local msgpack::zone zone;
  zone.clear();
  // Limits stop hostile input from nesting deeply or declaring huge containers; they are far
  // above anything a valid message needs.
  const msgpack::unpack_limit limit(/*array=*/1024, /*map=*/64, /*str=*/kMaxMessageBytes,
                                    /*bin=*/kMaxMessageBytes, /*ext=*/kMaxMessageBytes,
                                    /*depth=*/8);
  size_t off = 0;
  bool referenced = false;
  msgpack::object root;
  try {
    root = msgpack::unpack(zone, data, size, off, referenced, nullptr, nullptr, limit);
  } catch (const msgpack::insufficient_bytes&) {
    return Fail(DecodeError::kMalformed, "truncated msgpack value");
  } catch (const std::exception& e) {
    return Fail(DecodeError::kMalformed, std::string("not msgpack: ") + e.what());
  }
  if (off != size) return Fail(DecodeError::kTrailingBytes, "bytes after the message");

  if (root.type != msgpack::type::ARRAY || root.via.array.size < 3) {
    return Fail(DecodeError::kBadEnvelope, "not an array [version, type, fields]");
  }
  const msgpack::object* env = root.via.array.ptr;
  if (env[0].type != msgpack::type::POSITIVE_INTEGER ||
      env[1].type != msgpack::type::POSITIVE_INTEGER || env[2].type != msgpack::type::ARRAY) {
    return Fail(DecodeError::kBadEnvelope, "envelope fields have the wrong types");
  }
  if (env[0].via.u64 != kProtocolVersion) {
    return Fail(DecodeError::kVersion, "protocol version " + std::to_string(env[0].via.u64) +
                                           " (this side speaks " +
                                           std::to_string(kProtocolVersion) + ")");
  }
  Decoded out;
  const msgpack::object_array& fields = env[2].via.array;
  switch (static_cast<MessageType>(env[1].via.u64)) {
    case MessageType::kHello:
      ParseInto<Hello>(fields, out);
      break;
    case MessageType::kWelcome:
      ParseInto<Welcome>(fields, out);
      break;
    case MessageType::kClockPing:
      ParseInto<ClockPing>(fields, out);
      break;
    case MessageType::kClockPong:
      ParseInto<ClockPong>(fields, out);
      break;
    case MessageType::kProfileReport:
      ParseInto<ProfileReport>(fields, out);
      break;
    case MessageType::kTimetablePush:
      ParseInto<TimetablePush>(fields, out);
      break;
    case MessageType::kBye:
      ParseInto<Bye>(fields, out);
      break;
    case MessageType::kError:
      ParseInto<Error>(fields, out);
      break;
    case MessageType::kPhaseEdge:
      ParseInto<PhaseEdge>(fields, out);
      break;
    case MessageType::kTurnPush:
      ParseInto<TurnPush>(fields, out);
      break;
    case MessageType::kTurnEdge:
      ParseInto<TurnEdge>(fields, out);
      break;
    default:
      return Fail(DecodeError::kUnknownType, "message type " + std::to_string(env[1].via.u64));
  }
  return out;
}

}  // namespace

MessageType TypeOf(const Message& m) {
  return static_cast<MessageType>(m.index() + 1);  // variant order follows MessageType
}

std::string_view TypeName(MessageType t) {
  switch (t) {
    case MessageType::kHello:
      return "hello";
    case MessageType::kWelcome:
      return "welcome";
    case MessageType::kClockPing:
      return "clock_ping";
    case MessageType::kClockPong:
      return "clock_pong";
    case MessageType::kProfileReport:
      return "profile_report";
    case MessageType::kTimetablePush:
      return "timetable_push";
    case MessageType::kBye:
      return "bye";
    case MessageType::kError:
      return "error";
    case MessageType::kPhaseEdge:
      return "phase_edge";
    case MessageType::kTurnPush:
      return "turn_push";
    case MessageType::kTurnEdge:
      return "turn_edge";
  }
  return "unknown";
}

std::string_view DecodeErrorName(DecodeError e) {
  switch (e) {
    case DecodeError::kNone:
      return "none";
    case DecodeError::kEmpty:
      return "empty";
    case DecodeError::kTooLarge:
      return "too_large";
    case DecodeError::kMalformed:
      return "malformed";
    case DecodeError::kTrailingBytes:
      return "trailing_bytes";
    case DecodeError::kBadEnvelope:
      return "bad_envelope";
    case DecodeError::kVersion:
      return "version";
    case DecodeError::kUnknownType:
      return "unknown_type";
    case DecodeError::kBadField:
      return "bad_field";
  }
  return "unknown";
}

void Encode(const Message& m, std::string& out) {
  out.clear();
  StringSink sink{&out};
  Packer pk(sink);
  pk.pack_array(3);
  pk.pack(kProtocolVersion);
  pk.pack(static_cast<uint32_t>(TypeOf(m)));
  std::visit([&pk](const auto& msg) { PackFields(pk, msg); }, m);
}

std::string Encode(const Message& m) {
  std::string out;
  Encode(m, out);
  return out;
}

Decoded Decode(const void* data, size_t size) {
  if (size == 0) return Fail(DecodeError::kEmpty, "empty frame");
  if (size > kMaxMessageBytes) {
    return Fail(DecodeError::kTooLarge, std::to_string(size) + " bytes exceeds the limit of " +
                                            std::to_string(kMaxMessageBytes));
  }
  try {
    return DecodeUnchecked(static_cast<const char*>(data), size);
  } catch (const std::exception& e) {  // e.g. bad_alloc: still never escapes
    return Fail(DecodeError::kMalformed, std::string("decoder failure: ") + e.what());
  } catch (...) {
    return Fail(DecodeError::kMalformed, "decoder failure");
  }
}

}  // namespace metronome::proto
