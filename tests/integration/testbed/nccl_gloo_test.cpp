// The Gloo stand-in of libnccl.so.2: every collective and data type against a reference computed
// here, on random data, for 2, 3 and 4 ranks (threads of this process, one communicator each);
// send/receive in groups; bad arguments rejected.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

const std::vector<ncclDataType_t> kTypes = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,
                                            ncclInt64,   ncclUint64,  ncclFloat16, ncclFloat32,
                                            ncclFloat64, ncclBfloat16};
const std::vector<ncclRedOp_t> kOps = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
const std::vector<int> kWorldSizes = {2, 3, 4};

std::size_t SizeOf(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

bool IsSigned(ncclDataType_t type) {
  return type != ncclUint8 && type != ncclUint32 && type != ncclUint64;
}

// bfloat16 from float, round to nearest even (the test's own conversion; GCC 12's __bf16 has
// no arithmetic conversions).
std::uint16_t ToBfloat16(float f) {
  const auto bits = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// The compiler's IEEE half: _Float16, or __fp16 for clang before 15 (clang-tidy 14), which has
// no _Float16 on x86 but converts to its storage-only __fp16 with the same rounding.
#if defined(__clang__) && __clang_major__ < 15
using Half = __fp16;
#else
using Half = _Float16;
#endif

// Element i of a typed buffer, written from a value computed in the type's arithmetic.
// Floating-point values are rounded by the compiler's own conversions (Half, float).
void Store(ncclDataType_t type, std::vector<unsigned char>& buf, std::size_t i, long double v) {
  unsigned char* p = buf.data() + i * SizeOf(type);
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  switch (type) {
    case ncclInt8:
      put(static_cast<std::int8_t>(v));
      break;
    case ncclUint8:
      put(static_cast<std::uint8_t>(v));
      break;
    case ncclInt32:
      put(static_cast<std::int32_t>(v));
      break;
    case ncclUint32:
      put(static_cast<std::uint32_t>(v));
      break;
    case ncclInt64:
      put(static_cast<std::int64_t>(v));
      break;
    case ncclUint64:
      put(static_cast<std::uint64_t>(v));
      break;
    case ncclFloat16: {
      const Half h = static_cast<Half>(static_cast<float>(v));  // __fp16 is no parameter type
      std::memcpy(p, &h, sizeof(h));
      break;
    }
    case ncclFloat32:
      put(static_cast<float>(v));
      break;
    case ncclFloat64:
      put(static_cast<double>(v));
      break;
    case ncclBfloat16:
      put(ToBfloat16(static_cast<float>(v)));
      break;
    default:
      FAIL() << "unexpected type";
  }
}

// Random small integers: sums and products of up to 4 ranks are exact in every type.
std::vector<unsigned char> RandomData(ncclDataType_t type, ncclRedOp_t op, std::size_t count,
                                      std::mt19937& rng, std::vector<long>& values) {
  const long lo = op == ncclProd ? (IsSigned(type) ? -3 : 1) : (IsSigned(type) ? -8 : 0);
  const long hi = op == ncclProd ? 3 : 8;
  std::uniform_int_distribution<long> dist(lo, hi);
  std::vector<unsigned char> buf(count * SizeOf(type));
  values.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    do {
      values[i] = dist(rng);
    } while (op == ncclProd && values[i] == 0);  // 0 * -3 is -0.0 in floating point
    Store(type, buf, i, static_cast<long double>(values[i]));
  }
  return buf;
}

// The reduction of small integers across ranks, stored in `type` as NCCL defines it
// (avg: the exact sum divided by the rank count in the type's arithmetic; integers truncate).
std::vector<unsigned char> Reference(ncclDataType_t type, ncclRedOp_t op,
                                     const std::vector<std::vector<long>>& values) {
  const std::size_t count = values[0].size();
  const auto n = static_cast<long>(values.size());
  std::vector<unsigned char> out(count * SizeOf(type));
  for (std::size_t i = 0; i < count; ++i) {
    long acc = values[0][i];
    for (std::size_t r = 1; r < values.size(); ++r) {
      const long v = values[r][i];
      switch (op) {
        case ncclSum:
        case ncclAvg:
          acc += v;
          break;
        case ncclProd:
          acc *= v;
          break;
        case ncclMax:
          acc = std::max(acc, v);
          break;
        default:
          acc = std::min(acc, v);
          break;
      }
    }
    if (op != ncclAvg) {
      Store(type, out, i, static_cast<long double>(acc));
    } else if (type == ncclFloat64) {
      Store(type, out, i,
            static_cast<long double>(static_cast<double>(acc) / static_cast<double>(n)));
    } else if (type == ncclFloat16 || type == ncclFloat32 || type == ncclBfloat16) {
      Store(type, out, i,
            static_cast<long double>(static_cast<float>(acc) / static_cast<float>(n)));
    } else {
      // Integers average by truncating division (unsigned types hold only non-negative values
      // here).
      const long quotient = acc / n;
      Store(type, out, i, static_cast<long double>(quotient));
    }
  }
  return out;
}

std::string Describe(ncclDataType_t type, ncclRedOp_t op, int nranks) {
  return "type " + std::to_string(static_cast<int>(type)) + " op " +
         std::to_string(static_cast<int>(op)) + " ranks " + std::to_string(nranks);
}

// The ranks of one communicator, each driven by its own thread.
struct World {
  std::vector<ncclComm_t> comms;

  explicit World(int nranks) : comms(static_cast<std::size_t>(nranks), nullptr) {
    ncclUniqueId id;
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    std::vector<ncclResult_t> results(comms.size());
    Run([&](int rank, ncclComm_t&) {
      results[static_cast<std::size_t>(rank)] =
          ncclCommInitRank(&comms[static_cast<std::size_t>(rank)], nranks, id, rank);
    });
    for (auto rc : results) EXPECT_EQ(rc, ncclSuccess) << ncclGetLastError(nullptr);
  }
  ~World() {
    for (auto comm : comms) {
      if (comm != nullptr) {
        EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
      }
    }
  }
  int Size() const { return static_cast<int>(comms.size()); }

  void Run(const std::function<void(int, ncclComm_t&)>& fn) {
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(Size()));
    for (int r = 0; r < Size(); ++r) {
      threads.emplace_back([&, r] { fn(r, comms[static_cast<std::size_t>(r)]); });
    }
    for (auto& t : threads) t.join();
  }
};

class NcclGloo : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    worlds = new std::map<int, std::unique_ptr<World>>;
    for (int n : kWorldSizes) (*worlds)[n] = std::make_unique<World>(n);
  }
  static void TearDownTestSuite() {
    delete worlds;
    worlds = nullptr;
  }
  static World& WorldOf(int n) { return *(*worlds)[n]; }
  static std::map<int, std::unique_ptr<World>>* worlds;
};
std::map<int, std::unique_ptr<World>>* NcclGloo::worlds = nullptr;

TEST_F(NcclGloo, AllReduceEveryTypeAndOpMatchesReference) {
  std::mt19937 rng(1);
  for (int n : kWorldSizes) {
    for (auto type : kTypes) {
      for (auto op : kOps) {
        const std::size_t count = 1000 + static_cast<std::size_t>(n);  // not a multiple of n
        std::vector<std::vector<long>> values(static_cast<std::size_t>(n));
        std::vector<std::vector<unsigned char>> send, recv;
        for (int r = 0; r < n; ++r) {
          send.push_back(RandomData(type, op, count, rng, values[static_cast<std::size_t>(r)]));
          recv.emplace_back(send.back().size(), 0xab);
        }
        const auto expected = Reference(type, op, values);
        WorldOf(n).Run([&](int r, ncclComm_t& comm) {
          const auto i = static_cast<std::size_t>(r);
          // Even ranks out of place, odd ranks in place.
          if (r % 2 == 0) {
            EXPECT_EQ(ncclAllReduce(send[i].data(), recv[i].data(), count, type, op, comm, nullptr),
                      ncclSuccess);
          } else {
            recv[i] = send[i];
            EXPECT_EQ(ncclAllReduce(recv[i].data(), recv[i].data(), count, type, op, comm, nullptr),
                      ncclSuccess);
          }
        });
        for (int r = 0; r < n; ++r) {
          EXPECT_EQ(recv[static_cast<std::size_t>(r)], expected)
              << Describe(type, op, n) << " rank " << r;
        }
      }
    }
  }
}

TEST_F(NcclGloo, LargeAllReduceSpansManySegments) {
  const std::size_t count = 3 << 20;  // 12 MiB of floats: many of Gloo's 1 MiB segments
  World& w = WorldOf(3);
  std::vector<std::vector<float>> bufs(3);
  for (int r = 0; r < 3; ++r) {
    bufs[static_cast<std::size_t>(r)].resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      bufs[static_cast<std::size_t>(r)][i] =
          static_cast<float>((i % 100) * static_cast<std::size_t>(r + 1));
    }
  }
  w.Run([&](int r, ncclComm_t& comm) {
    auto& b = bufs[static_cast<std::size_t>(r)];
    EXPECT_EQ(ncclAllReduce(b.data(), b.data(), count, ncclFloat32, ncclSum, comm, nullptr),
              ncclSuccess);
  });
  for (const auto& b : bufs) {
    for (std::size_t i = 0; i < count; i += 997) ASSERT_EQ(b[i], static_cast<float>((i % 100) * 6));
  }
}

TEST_F(NcclGloo, BroadcastFromEveryRootEveryType) {
  std::mt19937 rng(2);
  for (int n : kWorldSizes) {
    for (auto type : kTypes) {
      for (int root = 0; root < n; ++root) {
        const std::size_t count = 517;
        std::vector<long> values;
        const auto data = RandomData(type, ncclSum, count, rng, values);
        std::vector<std::vector<unsigned char>> recv(static_cast<std::size_t>(n),
                                                     std::vector<unsigned char>(data.size(), 0));
        WorldOf(n).Run([&](int r, ncclComm_t& comm) {
          auto& out = recv[static_cast<std::size_t>(r)];
          if (root % 2 == 0) {
            EXPECT_EQ(ncclBroadcast(r == root ? data.data() : nullptr, out.data(), count, type,
                                    root, comm, nullptr),
                      ncclSuccess);
          } else {
            if (r == root) out = data;
            EXPECT_EQ(ncclBcast(out.data(), count, type, root, comm, nullptr), ncclSuccess);
          }
        });
        for (int r = 0; r < n; ++r) {
          EXPECT_EQ(recv[static_cast<std::size_t>(r)], data)
              << Describe(type, ncclSum, n) << " root " << root;
        }
      }
    }
  }
}

TEST_F(NcclGloo, ReduceToEveryRootEveryTypeAndOp) {
  std::mt19937 rng(3);
  for (int n : kWorldSizes) {
    for (auto type : kTypes) {
      for (auto op : kOps) {
        const int root = static_cast<int>(static_cast<unsigned>(type) % static_cast<unsigned>(n));
        const std::size_t count = 301;
        std::vector<std::vector<long>> values(static_cast<std::size_t>(n));
        std::vector<std::vector<unsigned char>> send;
        send.reserve(static_cast<std::size_t>(n));
        for (int r = 0; r < n; ++r) {
          send.push_back(RandomData(type, op, count, rng, values[static_cast<std::size_t>(r)]));
        }
        const auto expected = Reference(type, op, values);
        std::vector<unsigned char> out(expected.size(), 0);
        const auto send_copy = send;
        WorldOf(n).Run([&](int r, ncclComm_t& comm) {
          void* recvbuff = r == root ? out.data() : nullptr;  // only the root needs one
          EXPECT_EQ(ncclReduce(send[static_cast<std::size_t>(r)].data(), recvbuff, count, type, op,
                               root, comm, nullptr),
                    ncclSuccess);
        });
        EXPECT_EQ(out, expected) << Describe(type, op, n) << " root " << root;
        EXPECT_EQ(send, send_copy) << "send buffers must not change";
      }
    }
  }
}

TEST_F(NcclGloo, AllGatherEveryType) {
  std::mt19937 rng(4);
  for (int n : kWorldSizes) {
    for (auto type : kTypes) {
      const std::size_t count = 123;
      const std::size_t bytes = count * SizeOf(type);
      std::vector<std::vector<unsigned char>> send;
      std::vector<unsigned char> expected;
      for (int r = 0; r < n; ++r) {
        std::vector<long> values;
        send.push_back(RandomData(type, ncclSum, count, rng, values));
        expected.insert(expected.end(), send.back().begin(), send.back().end());
      }
      std::vector<std::vector<unsigned char>> recv(static_cast<std::size_t>(n),
                                                   std::vector<unsigned char>(expected.size(), 0));
      WorldOf(n).Run([&](int r, ncclComm_t& comm) {
        const auto i = static_cast<std::size_t>(r);
        if (r % 2 == 0) {
          EXPECT_EQ(ncclAllGather(send[i].data(), recv[i].data(), count, type, comm, nullptr),
                    ncclSuccess);
        } else {  // in place: sendbuff is this rank's slice of recvbuff
          std::memcpy(recv[i].data() + i * bytes, send[i].data(), bytes);
          EXPECT_EQ(
              ncclAllGather(recv[i].data() + i * bytes, recv[i].data(), count, type, comm, nullptr),
              ncclSuccess);
        }
      });
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(recv[static_cast<std::size_t>(r)], expected) << Describe(type, ncclSum, n);
      }
    }
  }
}

TEST_F(NcclGloo, ReduceScatterEveryTypeAndOp) {
  std::mt19937 rng(5);
  for (int n : kWorldSizes) {
    for (auto type : kTypes) {
      for (auto op : kOps) {
        const std::size_t recvcount = 77;
        const std::size_t block_bytes = recvcount * SizeOf(type);
        std::vector<std::vector<long>> values(static_cast<std::size_t>(n));
        std::vector<std::vector<unsigned char>> send;
        send.reserve(static_cast<std::size_t>(n));
        for (int r = 0; r < n; ++r) {
          send.push_back(RandomData(type, op, recvcount * static_cast<std::size_t>(n), rng,
                                    values[static_cast<std::size_t>(r)]));
        }
        const auto full = Reference(type, op, values);
        std::vector<std::vector<unsigned char>> recv(static_cast<std::size_t>(n),
                                                     std::vector<unsigned char>(block_bytes, 0));
        WorldOf(n).Run([&](int r, ncclComm_t& comm) {
          EXPECT_EQ(ncclReduceScatter(send[static_cast<std::size_t>(r)].data(),
                                      recv[static_cast<std::size_t>(r)].data(), recvcount, type, op,
                                      comm, nullptr),
                    ncclSuccess);
        });
        for (int r = 0; r < n; ++r) {
          const auto begin =
              full.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * block_bytes);
          const std::vector<unsigned char> expected(
              begin, begin + static_cast<std::ptrdiff_t>(block_bytes));
          EXPECT_EQ(recv[static_cast<std::size_t>(r)], expected)
              << Describe(type, op, n) << " rank " << r;
        }
      }
    }
  }
}

// Every rank sends a distinct message to every rank (itself included) inside one group: without
// queueing until ncclGroupEnd this deadlocks.
TEST_F(NcclGloo, SendRecvAllPairsInOneGroup) {
  for (int n : kWorldSizes) {
    const std::size_t count = 2000;
    auto message = [](int from, int to, std::size_t i) {
      return static_cast<std::int32_t>(from * 1000000 + to * 10000 + static_cast<int>(i % 10000));
    };
    std::vector<std::vector<std::vector<std::int32_t>>> inbox(
        static_cast<std::size_t>(n),
        std::vector<std::vector<std::int32_t>>(static_cast<std::size_t>(n)));
    WorldOf(n).Run([&](int r, ncclComm_t& comm) {
      std::vector<std::vector<std::int32_t>> outbox(static_cast<std::size_t>(n));
      auto& in = inbox[static_cast<std::size_t>(r)];
      EXPECT_EQ(ncclGroupStart(), ncclSuccess);
      for (int peer = 0; peer < n; ++peer) {
        auto& out = outbox[static_cast<std::size_t>(peer)];
        for (std::size_t i = 0; i < count; ++i) out.push_back(message(r, peer, i));
        in[static_cast<std::size_t>(peer)].assign(count, -1);
        EXPECT_EQ(ncclSend(out.data(), count, ncclInt32, peer, comm, nullptr), ncclSuccess);
        EXPECT_EQ(ncclRecv(in[static_cast<std::size_t>(peer)].data(), count, ncclInt32, peer, comm,
                           nullptr),
                  ncclSuccess);
      }
      EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
    });
    for (int to = 0; to < n; ++to) {
      for (int from = 0; from < n; ++from) {
        const auto& got = inbox[static_cast<std::size_t>(to)][static_cast<std::size_t>(from)];
        for (std::size_t i = 0; i < count; ++i) {
          ASSERT_EQ(got[i], message(from, to, i)) << n << " " << from << "->" << to;
        }
      }
    }
  }
}

// A ring shift with several messages per pair, nested groups and a collective in the same group.
TEST_F(NcclGloo, NestedGroupWithRingShiftAndCollective) {
  for (int n : kWorldSizes) {
    std::vector<std::vector<double>> got(static_cast<std::size_t>(n), std::vector<double>(64, 0));
    std::vector<std::vector<double>> got2(static_cast<std::size_t>(n), std::vector<double>(8, 0));
    std::vector<std::int64_t> sums(static_cast<std::size_t>(n), 0);
    WorldOf(n).Run([&](int r, ncclComm_t& comm) {
      const int next = (r + 1) % n;
      const int prev = (r + n - 1) % n;
      std::vector<double> a(64, r + 0.5);
      std::vector<double> b(8, r + 0.25);
      std::int64_t mine = r + 1;
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      EXPECT_EQ(
          ncclRecv(got[static_cast<std::size_t>(r)].data(), 64, ncclFloat64, prev, comm, nullptr),
          ncclSuccess);
      EXPECT_EQ(ncclSend(a.data(), 64, ncclFloat64, next, comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);  // inner: nothing runs yet
      EXPECT_EQ(ncclAllReduce(&mine, &sums[static_cast<std::size_t>(r)], 1, ncclInt64, ncclSum,
                              comm, nullptr),
                ncclSuccess);
      EXPECT_EQ(ncclSend(b.data(), 8, ncclFloat64, next, comm, nullptr), ncclSuccess);
      EXPECT_EQ(
          ncclRecv(got2[static_cast<std::size_t>(r)].data(), 8, ncclFloat64, prev, comm, nullptr),
          ncclSuccess);
      EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
    });
    for (int r = 0; r < n; ++r) {
      const int prev = (r + n - 1) % n;
      EXPECT_EQ(got[static_cast<std::size_t>(r)], std::vector<double>(64, prev + 0.5));
      EXPECT_EQ(got2[static_cast<std::size_t>(r)], std::vector<double>(8, prev + 0.25));
      EXPECT_EQ(sums[static_cast<std::size_t>(r)], n * (n + 1) / 2);
    }
  }
}

// Outside a group a send blocks until the peer receives: a plain exchange in opposite order works.
TEST_F(NcclGloo, BlockingSendRecvOutsideGroup) {
  World& w = WorldOf(2);
  std::vector<float> got(100, 0);
  w.Run([&](int r, ncclComm_t& comm) {
    std::vector<float> data(100, 42.0f);
    if (r == 0) {
      EXPECT_EQ(ncclSend(data.data(), 100, ncclFloat32, 1, comm, nullptr), ncclSuccess);
    } else {
      EXPECT_EQ(ncclRecv(got.data(), 100, ncclFloat32, 0, comm, nullptr), ncclSuccess);
    }
  });
  EXPECT_EQ(got, std::vector<float>(100, 42.0f));
}

TEST_F(NcclGloo, CommunicatorQueries) {
  for (int n : kWorldSizes) {
    WorldOf(n).Run([&](int r, ncclComm_t& comm) {
      int count = -1, rank = -1, device = -1;
      ncclResult_t async = ncclInternalError;
      EXPECT_EQ(ncclCommCount(comm, &count), ncclSuccess);
      EXPECT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
      EXPECT_EQ(ncclCommCuDevice(comm, &device), ncclSuccess);
      EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
      EXPECT_EQ(count, n);
      EXPECT_EQ(rank, r);
      EXPECT_EQ(device, 0);
      EXPECT_EQ(async, ncclSuccess);
      EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess);
    });
  }
}

TEST(NcclGlooApi, VersionAndErrorStrings) {
  int version = 0;
  EXPECT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  for (int rc = 0; rc < ncclNumResults; ++rc) {
    EXPECT_NE(std::string(ncclGetErrorString(static_cast<ncclResult_t>(rc))), "");
  }
  // The profiling-interface names are the same functions (ncclX is an alias of pncclX).
  EXPECT_EQ(pncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  EXPECT_EQ(reinterpret_cast<void*>(&ncclAllReduce), reinterpret_cast<void*>(&pncclAllReduce));
  EXPECT_EQ(reinterpret_cast<void*>(&ncclGroupEnd), reinterpret_cast<void*>(&pncclGroupEnd));
  EXPECT_EQ(reinterpret_cast<void*>(&ncclCommInitRankConfig),
            reinterpret_cast<void*>(&pncclCommInitRankConfig));
  // An interposer finds pncclX in the loaded library, as it would in the real one.
  void* lib = ::dlopen("libnccl.so.2", RTLD_NOLOAD | RTLD_LAZY);
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(::dlsym(lib, "pncclAllReduce"), reinterpret_cast<void*>(&pncclAllReduce));
  EXPECT_NE(::dlsym(lib, "metronome_nccl_standin"), nullptr);
  ::dlclose(lib);
}

TEST_F(NcclGloo, BadArgumentsAreRejected) {
  World& w = WorldOf(2);
  ncclComm_t comm = w.comms[0];
  std::vector<float> buf(16, 1.0f);
  float* b = buf.data();
  // Null communicator.
  EXPECT_EQ(ncclAllReduce(b, b, 16, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("communicator"), std::string::npos);
  // A pointer that is not a communicator.
  auto* bogus = reinterpret_cast<ncclComm_t>(b);
  EXPECT_EQ(ncclAllReduce(b, b, 16, ncclFloat32, ncclSum, bogus, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(bogus), ncclInvalidArgument);
  // Null buffers with count > 0 (allowed with count 0).
  EXPECT_EQ(ncclAllReduce(nullptr, b, 16, ncclFloat32, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(b, nullptr, 16, ncclFloat32, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllGather(b, nullptr, 4, ncclFloat32, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclSend(nullptr, 4, ncclFloat32, 1, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclRecv(nullptr, 4, ncclFloat32, 1, comm, nullptr), ncclInvalidArgument);
  // Bad data type and op.
  EXPECT_EQ(ncclAllReduce(b, b, 16, ncclNumTypes, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(b, b, 16, static_cast<ncclDataType_t>(15), ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(b, b, 16, ncclFloat32, static_cast<ncclRedOp_t>(7), comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclReduceScatter(b, b, 8, ncclFloat32, ncclNumOps, comm, nullptr),
            ncclInvalidArgument);
  // Root and peer out of range.
  EXPECT_EQ(ncclBroadcast(b, b, 16, ncclFloat32, 2, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclReduce(b, b, 16, ncclFloat32, ncclSum, -1, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclSend(b, 16, ncclFloat32, 2, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclRecv(b, 16, ncclFloat32, -1, comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("out of range"), std::string::npos);
  // Query outputs.
  EXPECT_EQ(ncclCommCount(comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommUserRank(nullptr, nullptr), ncclInvalidArgument);
  // Groups.
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  // Initialization.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  ncclComm_t out = nullptr;
  EXPECT_EQ(ncclCommInitRank(&out, 2, id, 0), ncclInvalidArgument);  // not our id
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_EQ(ncclCommInitRank(&out, 2, id, 2), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(&out, 0, id, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(nullptr, 2, id, 0), ncclInvalidArgument);
  ncclConfig_t config{};  // not NCCL_CONFIG_INITIALIZER
  EXPECT_EQ(ncclCommInitRankConfig(&out, 2, id, 0, &config), ncclInvalidArgument);
  EXPECT_EQ(ncclGetUniqueId(nullptr), ncclInvalidArgument);
  // Count 0 is a no-op, even with null buffers.
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  // The communicator still works afterwards.
  w.Run([&](int, ncclComm_t& c) {
    float x = 1.0f;
    EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr), ncclSuccess);
    EXPECT_EQ(x, 2.0f);
  });
}

TEST_F(NcclGloo, UnsupportedCallsSayWhy) {
  ncclComm_t comm = WorldOf(2).comms[0];
  EXPECT_EQ(ncclCommRevoke(comm, 0), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("ncclCommRevoke is not supported"),
            std::string::npos);
  ncclRedOp_t op;
  float scalar = 2.0f;
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm),
            ncclInvalidUsage);
  ncclComm_t shrunk = comm;
  EXPECT_EQ(ncclCommShrink(comm, nullptr, 0, &shrunk, nullptr, 0), ncclInvalidUsage);
  EXPECT_EQ(shrunk, nullptr);
  float x[2] = {0, 0};
  EXPECT_EQ(ncclAlltoAll(x, x, 1, ncclFloat32, comm, nullptr), ncclInvalidUsage);  // in place
  std::uint8_t fp8 = 0;
  EXPECT_EQ(ncclAllReduce(&fp8, &fp8, 1, ncclFloat8e4m3, ncclSum, comm, nullptr), ncclInvalidUsage);
}

// All-to-all, gather and scatter (sends and receives underneath), every type, every root.
TEST_F(NcclGloo, AlltoAllGatherScatterEveryType) {
  std::mt19937 rng(6);
  for (int n : kWorldSizes) {
    const auto un = static_cast<std::size_t>(n);
    for (auto type : kTypes) {
      const std::size_t count = 41;
      const std::size_t block = count * SizeOf(type);
      // data[r] holds n blocks; block p of rank r goes to rank p.
      std::vector<std::vector<unsigned char>> data;
      for (int r = 0; r < n; ++r) {
        std::vector<long> values;
        data.push_back(RandomData(type, ncclSum, count * un, rng, values));
      }
      auto block_of = [&](int r, int p) {
        const auto begin = data[static_cast<std::size_t>(r)].begin() +
                           static_cast<std::ptrdiff_t>(static_cast<std::size_t>(p) * block);
        return std::vector<unsigned char>(begin, begin + static_cast<std::ptrdiff_t>(block));
      };
      const int root = static_cast<int>(static_cast<unsigned>(type) % static_cast<unsigned>(n));
      std::vector<std::vector<unsigned char>> a2a(un, std::vector<unsigned char>(block * un, 0));
      std::vector<unsigned char> gathered(block * un, 0);
      std::vector<std::vector<unsigned char>> scattered(un, std::vector<unsigned char>(block, 0));
      WorldOf(n).Run([&](int r, ncclComm_t& comm) {
        const auto i = static_cast<std::size_t>(r);
        EXPECT_EQ(ncclAlltoAll(data[i].data(), a2a[i].data(), count, type, comm, nullptr),
                  ncclSuccess);
        EXPECT_EQ(ncclGather(data[i].data(), r == root ? gathered.data() : nullptr, count, type,
                             root, comm, nullptr),
                  ncclSuccess);
        EXPECT_EQ(ncclScatter(r == root ? data[i].data() : nullptr, scattered[i].data(), count,
                              type, root, comm, nullptr),
                  ncclSuccess);
      });
      for (int r = 0; r < n; ++r) {
        for (int p = 0; p < n; ++p) {
          const auto off = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(p) * block);
          const std::vector<unsigned char> got(
              a2a[static_cast<std::size_t>(r)].begin() + off,
              a2a[static_cast<std::size_t>(r)].begin() + off + static_cast<std::ptrdiff_t>(block));
          EXPECT_EQ(got, block_of(p, r)) << "alltoall " << Describe(type, ncclSum, n);
        }
        const auto off = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * block);
        const std::vector<unsigned char> g(
            gathered.begin() + off, gathered.begin() + off + static_cast<std::ptrdiff_t>(block));
        EXPECT_EQ(g, block_of(r, 0)) << "gather " << Describe(type, ncclSum, n);
        EXPECT_EQ(scattered[static_cast<std::size_t>(r)], block_of(root, r))
            << "scatter " << Describe(type, ncclSum, n);
      }
    }
  }
}

// ncclCommSplit: colors by parity, keys reversing the order; one rank opts out.
TEST_F(NcclGloo, SplitByColorAndKey) {
  World& w = WorldOf(4);
  std::vector<ncclComm_t> children(4, nullptr);
  std::vector<int> sizes(4, -1), ranks(4, -1), sums(4, -1);
  w.Run([&](int r, ncclComm_t& comm) {
    const auto i = static_cast<std::size_t>(r);
    const int color = r == 3 ? NCCL_SPLIT_NOCOLOR : r % 2;
    ASSERT_EQ(ncclCommSplit(comm, color, -r, &children[i], nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    if (children[i] == nullptr) return;
    EXPECT_EQ(ncclCommCount(children[i], &sizes[i]), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(children[i], &ranks[i]), ncclSuccess);
    int v = r;
    EXPECT_EQ(ncclAllReduce(&v, &sums[i], 1, ncclInt32, ncclSum, children[i], nullptr),
              ncclSuccess);
  });
  EXPECT_EQ(children[3], nullptr);  // NCCL_SPLIT_NOCOLOR
  EXPECT_EQ(sizes, (std::vector<int>{2, 1, 2, -1}));
  EXPECT_EQ(ranks, (std::vector<int>{1, 0, 0, -1}));  // key -r: parent rank 2 comes first
  EXPECT_EQ(sums, (std::vector<int>{2, 1, 2, -1}));
  for (auto c : children) {
    if (c != nullptr) {
      EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
    }
  }
  // The parent still works.
  w.Run([&](int, ncclComm_t& comm) {
    int one = 1, total = 0;
    EXPECT_EQ(ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(total, 4);
  });
}

// fp8 values are only moved, never reduced: broadcast works.
TEST_F(NcclGloo, Fp8IsMovedVerbatim) {
  std::vector<std::vector<std::uint8_t>> bufs(2, std::vector<std::uint8_t>(33, 0));
  for (std::size_t i = 0; i < 33; ++i) bufs[0][i] = static_cast<std::uint8_t>(i * 7);
  WorldOf(2).Run([&](int r, ncclComm_t& comm) {
    auto& b = bufs[static_cast<std::size_t>(r)];
    EXPECT_EQ(ncclBroadcast(b.data(), b.data(), 33, ncclFloat8e5m2, 0, comm, nullptr), ncclSuccess);
  });
  EXPECT_EQ(bufs[1], bufs[0]);
}

// One thread drives every rank: ncclCommInitAll, then a group with one all-reduce per
// communicator (they must run concurrently at ncclGroupEnd).
TEST(NcclGlooApi, InitAllAndOneThreadDrivingAllRanks) {
  const int n = 3;
  std::vector<ncclComm_t> comms(n, nullptr);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<std::int32_t>> bufs(n);
  for (int r = 0; r < n; ++r) bufs[static_cast<std::size_t>(r)].assign(50, r + 1);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    auto& b = bufs[static_cast<std::size_t>(r)];
    ASSERT_EQ(ncclAllReduce(b.data(), b.data(), 50, ncclInt32, ncclMax,
                            comms[static_cast<std::size_t>(r)], nullptr),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (const auto& b : bufs) EXPECT_EQ(b, std::vector<std::int32_t>(50, n));
  int device = -1;
  EXPECT_EQ(ncclCommCuDevice(comms[2], &device), ncclSuccess);
  EXPECT_EQ(device, 2);
  for (auto c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// ncclCommInitRank of several ranks from one thread inside a group (NCCL's documented pattern).
TEST(NcclGlooApi, InitRankInsideGroupFromOneThread) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&comms[0], 2, id, 0), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&comms[1], 2, id, 1), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  double x[2] = {1.5, 2.5};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ncclAllReduce(&x[r], &x[r], 1, ncclFloat64, ncclSum, comms[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(x[0], 4.0);
  EXPECT_EQ(x[1], 4.0);
  EXPECT_EQ(ncclCommDestroy(comms[0]), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comms[1]), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comms[1]), ncclInvalidArgument);  // already destroyed
}

// The rendezvous kinds chosen by METRONOME_STANDIN_RENDEZVOUS: a directory, and an explicit
// TCP address.
void AllReduceWithFreshId(int n) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(n), nullptr);
  std::vector<int> values(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto& comm = comms[static_cast<std::size_t>(r)];
      ASSERT_EQ(ncclCommInitRank(&comm, n, id, r), ncclSuccess) << ncclGetLastError(nullptr);
      values[static_cast<std::size_t>(r)] = r;
      EXPECT_EQ(
          ncclAllReduce(&values[static_cast<std::size_t>(r)], &values[static_cast<std::size_t>(r)],
                        1, ncclInt32, ncclSum, comm, nullptr),
          ncclSuccess);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    });
  }
  for (auto& t : threads) t.join();
  for (int v : values) EXPECT_EQ(v, n * (n - 1) / 2);
}

TEST(NcclGlooRendezvous, FileDirectory) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("nccl-gloo-test-" + std::to_string(::getpid()));
  ::setenv("METRONOME_STANDIN_RENDEZVOUS", ("file:" + dir.string()).c_str(), 1);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_EQ(std::string(id.internal).rfind("mtrn-gloo1;", 0), 0u);
  EXPECT_NE(std::string(id.internal).find(";file://" + dir.string()), std::string::npos);
  AllReduceWithFreshId(3);
  ::unsetenv("METRONOME_STANDIN_RENDEZVOUS");
  // Rank 0 removes the rendezvous files once everyone is connected.
  std::size_t left = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    (void)entry;
    ++left;
  }
  EXPECT_LE(left, 1u);  // at most the id made above, which no communicator used
  std::filesystem::remove_all(dir);
}

TEST(NcclGlooRendezvous, ExplicitTcpAddress) {
  ::setenv("METRONOME_STANDIN_RENDEZVOUS", "tcp:127.0.0.1:0", 1);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_NE(std::string(id.internal).find(";tcp://127.0.0.1:"), std::string::npos);
  AllReduceWithFreshId(2);
  ::setenv("METRONOME_STANDIN_RENDEZVOUS", "nonsense", 1);
  EXPECT_EQ(ncclGetUniqueId(&id), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("METRONOME_STANDIN_RENDEZVOUS"),
            std::string::npos);
  ::unsetenv("METRONOME_STANDIN_RENDEZVOUS");
}

}  // namespace
