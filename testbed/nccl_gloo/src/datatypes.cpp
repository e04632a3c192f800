#include "datatypes.hpp"

#include <cmath>
#include <type_traits>

#include "metronome/common/nccl_datatype.hpp"

namespace metronome::testbed::standin {

std::size_t TypeSize(ncclDataType_t type) noexcept {
  return metronome::NcclTypeSize(type);
}

bool IsValidType(ncclDataType_t type) noexcept {
  return TypeSize(type) != 0;
}

const char* TypeName(ncclDataType_t type) noexcept {
  switch (type) {
    case ncclInt8:
      return "int8";
    case ncclUint8:
      return "uint8";
    case ncclInt32:
      return "int32";
    case ncclUint32:
      return "uint32";
    case ncclInt64:
      return "int64";
    case ncclUint64:
      return "uint64";
    case ncclFloat16:
      return "float16";
    case ncclFloat32:
      return "float32";
    case ncclFloat64:
      return "float64";
    case ncclBfloat16:
      return "bfloat16";
    case ncclFloat8e4m3:
      return "float8e4m3";
    case ncclFloat8e5m2:
      return "float8e5m2";
    default:
      return "invalid";
  }
}

bool IsValidOp(ncclRedOp_t op) noexcept {
  return op == ncclSum || op == ncclProd || op == ncclMax || op == ncclMin || op == ncclAvg;
}

const char* OpName(ncclRedOp_t op) noexcept {
  switch (op) {
    case ncclSum:
      return "sum";
    case ncclProd:
      return "prod";
    case ncclMax:
      return "max";
    case ncclMin:
      return "min";
    case ncclAvg:
      return "avg";
    default:
      return "invalid";
  }
}

float HalfToFloat(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

std::uint16_t FloatToHalf(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf or NaN (NaN stays a quiet NaN)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u));
  }
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520
  if (magnitude < 0x38800000u) {
    // Below the smallest normal half (2^-14): a subnormal in units of 2^-24. Scaling by a power
    // of two is exact; nearbyint rounds to nearest even in the default rounding mode.
    const float scaled = std::bit_cast<float>(magnitude) * 16777216.0f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(scaled)));
  }
  std::uint32_t half = (((magnitude >> 23) - 112u) << 10) | ((magnitude & 0x7fffffu) >> 13);
  const std::uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u) != 0)) ++half;  // may carry: still right
  return static_cast<std::uint16_t>(sign | half);
}

std::uint16_t FloatToBfloat16(float f) noexcept {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

namespace {

// How a data type is stored and in which type it is computed.
template <typename T>
struct Native {
  using Storage = T;
  using Compute = T;
  static Compute Load(Storage v) { return v; }
  static Storage Store(Compute v) { return v; }
};
struct Half {
  using Storage = std::uint16_t;
  using Compute = float;
  static Compute Load(Storage v) { return HalfToFloat(v); }
  static Storage Store(Compute v) { return FloatToHalf(v); }
};
struct Bfloat16 {
  using Storage = std::uint16_t;
  using Compute = float;
  static Compute Load(Storage v) { return Bfloat16ToFloat(v); }
  static Storage Store(Compute v) { return FloatToBfloat16(v); }
};

// Integer sum and product wrap around (computed unsigned: signed overflow is undefined).
template <typename T>
T Add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename T>
T Multiply(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    // Promote to at least unsigned int so that small types do not multiply as signed int.
    using W = std::common_type_t<U, unsigned int>;
    return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

template <typename Traits, ncclRedOp_t Op>
void ReduceElements(void* c, const void* a, const void* b, std::size_t n) {
  using S = typename Traits::Storage;
  auto* out = static_cast<S*>(c);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  for (std::size_t i = 0; i < n; ++i) {
    const auto u = Traits::Load(x[i]);
    const auto v = Traits::Load(y[i]);
    if constexpr (Op == ncclSum) {
      out[i] = Traits::Store(Add(u, v));
    } else if constexpr (Op == ncclProd) {
      out[i] = Traits::Store(Multiply(u, v));
    } else if constexpr (Op == ncclMax) {
      out[i] = Traits::Store(u < v ? v : u);
    } else {
      out[i] = Traits::Store(v < u ? v : u);
    }
  }
}

template <typename Traits>
ReduceFn ForOp(ncclRedOp_t op) noexcept {
  switch (op) {
    case ncclSum:
    case ncclAvg:
      return &ReduceElements<Traits, ncclSum>;
    case ncclProd:
      return &ReduceElements<Traits, ncclProd>;
    case ncclMax:
      return &ReduceElements<Traits, ncclMax>;
    case ncclMin:
      return &ReduceElements<Traits, ncclMin>;
    default:
      return nullptr;
  }
}

template <typename Traits>
void DivideElements(void* buf, std::size_t count, int divisor) {
  using S = typename Traits::Storage;
  using C = typename Traits::Compute;
  auto* p = static_cast<S*>(buf);
  for (std::size_t i = 0; i < count; ++i) {
    p[i] = Traits::Store(static_cast<C>(Traits::Load(p[i]) / static_cast<C>(divisor)));
  }
}

}  // namespace

ReduceFn ReduceFunction(ncclDataType_t type, ncclRedOp_t op) noexcept {
  switch (type) {
    case ncclInt8:
      return ForOp<Native<std::int8_t>>(op);
    case ncclUint8:
      return ForOp<Native<std::uint8_t>>(op);
    case ncclInt32:
      return ForOp<Native<std::int32_t>>(op);
    case ncclUint32:
      return ForOp<Native<std::uint32_t>>(op);
    case ncclInt64:
      return ForOp<Native<std::int64_t>>(op);
    case ncclUint64:
      return ForOp<Native<std::uint64_t>>(op);
    case ncclFloat16:
      return ForOp<Half>(op);
    case ncclFloat32:
      return ForOp<Native<float>>(op);
    case ncclFloat64:
      return ForOp<Native<double>>(op);
    case ncclBfloat16:
      return ForOp<Bfloat16>(op);
    default:
      return nullptr;
  }
}

void DivideInPlace(void* buf, std::size_t count, ncclDataType_t type, int divisor) noexcept {
  switch (type) {
    case ncclInt8:
      return DivideElements<Native<std::int8_t>>(buf, count, divisor);
    case ncclUint8:
      return DivideElements<Native<std::uint8_t>>(buf, count, divisor);
    case ncclInt32:
      return DivideElements<Native<std::int32_t>>(buf, count, divisor);
    case ncclUint32:
      return DivideElements<Native<std::uint32_t>>(buf, count, divisor);
    case ncclInt64:
      return DivideElements<Native<std::int64_t>>(buf, count, divisor);
    case ncclUint64:
      return DivideElements<Native<std::uint64_t>>(buf, count, divisor);
    case ncclFloat16:
      return DivideElements<Half>(buf, count, divisor);
    case ncclFloat32:
      return DivideElements<Native<float>>(buf, count, divisor);
    case ncclFloat64:
      return DivideElements<Native<double>>(buf, count, divisor);
    case ncclBfloat16:
      return DivideElements<Bfloat16>(buf, count, divisor);
    default:
      return;
  }
}

}  // namespace metronome::testbed::standin
