// The wire protocol between the shim (ZeroMQ DEALER, one per process) and metronome-scheduler
// (ZeroMQ ROUTER). Every message is one ZeroMQ frame holding one msgpack value:
//
//   [protocol_version, message_type, [field, field, ...]]
//
// Fields are positional. A receiver accepts extra trailing fields (a newer peer of the same
// major version may append some) and rejects missing or wrongly typed ones. Decode() never
// throws and never reads past the buffer: every bad input yields an error value naming the
// problem, so that the caller can answer it and count it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "metronome/common/timetable.hpp"
#include "metronome/common/turn.hpp"
#include "metronome/common/yield.hpp"

namespace metronome::proto {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kMaxMessageBytes = size_t{64} * 1024;
inline constexpr size_t kMaxStringBytes = 256;  // ids, node names, reasons
inline constexpr size_t kMaxPhaseStarts = 64;   // recent phase starts per report

enum class MessageType : uint32_t {
  kHello = 1,          // shim -> scheduler: I am rank r of job j on node n
  kWelcome = 2,        // scheduler -> shim: registered; report this often
  kClockPing = 3,      // shim -> scheduler
  kClockPong = 4,      // scheduler -> shim
  kProfileReport = 5,  // shim -> scheduler: the rhythm the phase tracker learned
  kTimetablePush = 6,  // scheduler -> shim: your windows
  kBye = 7,            // shim -> scheduler: communicator destroyed / process exits
  kError = 8,          // either way: your last message was rejected
  kPhaseEdge = 9,      // shim -> scheduler: a phase of the job began or ended (turns)
  kTurnPush = 10,      // scheduler -> shim: whom the job takes turns with
  kTurnEdge = 11,      // scheduler -> shim: a partner's phase began or ended
};

// What a peer can do beyond the messages every version-1 peer knows, announced in a trailing
// field of its hello (shim) or welcome (scheduler); absent means none. A peer sends a message
// of a feature only to one that announced it.
enum Feature : uint32_t {
  // Taking turns on the links two jobs share (turn.hpp): a shim that holds for its partners and
  // sends its phase edges when asked; a scheduler that relays them.
  kFeatureTurns = 1u << 0,
};

enum class Priority : int32_t { kLow = 0, kNormal = 1, kHigh = 2 };

struct Hello {
  std::string job_id;
  std::string node;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  int32_t priority = static_cast<int32_t>(Priority::kNormal);  // higher = more important
  uint32_t pid = 0;
  uint32_t nccl_version = 0;  // NCCL_VERSION_CODE of the library the shim wraps
  std::string shim_version;
  // Optional (trailing; absent means ""): the pod the rank runs in, from the downward API. With
  // the Kubernetes integration on, the scheduler checks them against the API server and takes
  // the job's priority from the pod (docs/kubernetes.md, "Identity and priority"). The encoder
  // writes them up to the last one that is set.
  std::string pod_namespace;
  std::string pod_name;
  std::string pod_uid;
  // Optional (trailing, after the pod fields; absent means 0): the Feature bits of this shim.
  uint32_t features = 0;
};

struct Welcome {
  uint64_t session = 0;  // the scheduler's id for this registration
  uint32_t report_interval_ms = 1000;
  int64_t server_time_ns = 0;
  uint32_t features = 0;  // optional (trailing; absent means 0): the scheduler's Feature bits
};

struct ClockPing {
  uint64_t seq = 0;
  int64_t t1_ns = 0;  // client clock at send
};

struct ClockPong {
  uint64_t seq = 0;
  int64_t t1_ns = 0;  // echoed
  int64_t t2_ns = 0;  // server clock at receive
  int64_t t3_ns = 0;  // server clock at send
};

// The most bytes a report may give for one phase (1 PiB: a trillion-parameter model's gradients
// are a few TB); more would overflow the planner's wire times.
inline constexpr uint64_t kMaxBytesPerPhase = uint64_t{1} << 50;

struct ProfileReport {
  std::string job_id;
  uint32_t rank = 0;
  uint64_t iterations = 0;  // communication phases seen so far
  int64_t period_ns = 0;    // learned iteration period; 0 = not yet known
  int64_t comm_ns = 0;      // learned communication-phase duration
  uint64_t bytes_per_phase = 0;
  uint32_t collectives_per_phase = 0;
  double confidence = 0.0;               // 0..1, how stable the rhythm is
  int64_t clock_offset_ns = 0;           // the shim's estimate (server - client)
  int64_t clock_error_ns = -1;           // its bound; -1 = no estimate
  uint64_t timetable_version = 0;        // the timetable in force at the shim
  uint64_t gated = 0;                    // phases held by the gate (cumulative)
  uint64_t late = 0;                     // phases that arrived past late slack
  uint64_t failed_open = 0;              // phases released because max_wait was exceeded
  std::vector<int64_t> phase_starts_ns;  // recent phase starts, scheduler clock
  // Optional (a trailing field: peers that do not send it mean 0). How much of period_ns is the
  // gate holding the phases (median period minus the median period without holds):
  // period_ns - hold_ns is the job's ungated rhythm, so that a stretched job's measured period
  // does not ratchet its profile upwards.
  int64_t hold_ns = 0;
  // Optional (trailing; absent means 0 = unknown): how much the compute between two phases
  // varies from one iteration to the next (a robust standard deviation). The planner's cushions
  // absorb it.
  int64_t jitter_ns = 0;
  // Optional (trailing; 0 = unknown): the median compute between two phases. Measured apart
  // from the communication, it is the job's own, whatever contention stretched its phases.
  int64_t compute_ns = 0;
  // Optional (trailing; absent means 0): late phases the gate held to their next window rather
  // than let go into a neighbour's (cumulative; see common's MustRealign).
  uint64_t realigned = 0;
  // Optional (trailing; absent means 0): collectives the gate held for higher-ranked windows
  // (yield.hpp), and how long in all (cumulative).
  uint64_t yielded = 0;
  int64_t yield_wait_ns = 0;
};

// On the wire the push ends with a `gated` flag (optional, trailing; absent means 1): the encoder
// writes 0 for an always-open timetable, the scheduler's explicit "no gate", and the decoder
// makes a timetable flagged 0 always open (window = period, no slack, no wait) whatever its
// window said. In memory the timetable alone says it (AlwaysOpen): no second field to disagree.
// After it comes the yield set (optional, trailing; absent means none, and the encoder leaves it
// out when there is none): [need_ns, max_wait_ns,
// tolerance_ns, [[period_ns, offset_ns, window_ns], ...], allowance_ns] in the timetable's epoch,
// at most kMaxYieldWindows windows, the allowance optional (absent: 0; an earlier build sent a
// chunk size in its place, which a decoder now reads as an allowance of a few milliseconds);
// a set ValidateYieldSet rejects fails the whole message.
struct TimetablePush {
  std::string job_id;
  Timetable timetable;
  YieldSet yields;
};

struct Bye {
  std::string job_id;
  uint32_t rank = 0;
  std::string reason;
};

// A phase of the job began or ended on the wire, as rank `rank` saw it (scheduler clock). A
// shim sends them only while the job's latest TurnPush asks for them.
struct PhaseEdge {
  std::string job_id;
  uint32_t rank = 0;
  bool begun = false;  // began (else ended)
  int64_t at_ns = 0;   // > 0
};

// Whom the job takes turns with (turn.hpp), replacing what came before under a lower version;
// the partners' edges start unseen. On the wire: [job_id, version, send_edges, wire_ns,
// period_ns, [[job, higher, wire_ns, compute_ns], ...]]; an empty partner list (figures 0)
// means no turns, and a set ValidateTurnSet rejects fails the whole message.
struct TurnPush {
  std::string job_id;
  uint64_t version = 0;
  bool send_edges = false;  // the job is some job's partner: send its PhaseEdges
  TurnSet turns;            // begun/ended 0
};

// A partner's phase began or ended (scheduler clock), relayed to the job `job_id`.
struct TurnEdge {
  std::string job_id;
  uint64_t partner = 0;  // TurnPartner::job
  bool begun = false;
  int64_t at_ns = 0;  // > 0
};

enum class ErrorCode : uint32_t {
  kMalformed = 1,   // not decodable
  kVersion = 2,     // unsupported protocol version
  kUnexpected = 3,  // decodable but not valid in this state (e.g. a report before hello)
  kInvalid = 4,     // decodable, but a field is out of range
  kInternal = 5,
};

struct Error {
  ErrorCode code = ErrorCode::kMalformed;
  std::string message;
};

using Message = std::variant<Hello, Welcome, ClockPing, ClockPong, ProfileReport, TimetablePush,
                             Bye, Error, PhaseEdge, TurnPush, TurnEdge>;

MessageType TypeOf(const Message& m);
std::string_view TypeName(MessageType t);

// Encodes `m` into `out` (cleared first). Strings longer than kMaxStringBytes and phase lists
// longer than kMaxPhaseStarts are truncated, so that an encoded message always decodes.
void Encode(const Message& m, std::string& out);
std::string Encode(const Message& m);

enum class DecodeError : uint8_t {
  kNone = 0,
  kEmpty,          // zero-length frame
  kTooLarge,       // over kMaxMessageBytes
  kMalformed,      // not msgpack, truncated, or nested beyond limits
  kTrailingBytes,  // a valid value followed by garbage
  kBadEnvelope,    // not [version, type, [fields]]
  kVersion,        // protocol version we do not speak
  kUnknownType,    // message type we do not know
  kBadField,       // a field missing, of the wrong type, or out of range
};
std::string_view DecodeErrorName(DecodeError e);

struct Decoded {
  DecodeError error = DecodeError::kNone;
  std::string detail;  // human-readable: which field, what was wrong
  Message message;
  bool Ok() const { return error == DecodeError::kNone; }
};

Decoded Decode(const void* data, size_t size);
inline Decoded Decode(std::string_view bytes) {
  return Decode(bytes.data(), bytes.size());
}

}  // namespace metronome::proto
