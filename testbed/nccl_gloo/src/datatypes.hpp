// NCCL data types and reduction operators on host memory: element sizes, names, and the
// element-wise reduction functions handed to Gloo's algorithms.
#pragma once

#include <nccl.h>

#include <bit>
#include <cstddef>
#include <cstdint>

namespace metronome::testbed::standin {

// Bytes per element of `type`, or 0 when `type` is not an NCCL data type.
std::size_t TypeSize(ncclDataType_t type) noexcept;
const char* TypeName(ncclDataType_t type) noexcept;
bool IsValidType(ncclDataType_t type) noexcept;

bool IsValidOp(ncclRedOp_t op) noexcept;  // the built-in ops: sum, prod, max, min, avg
const char* OpName(ncclRedOp_t op) noexcept;

// c[i] = a[i] (op) b[i] for n elements; c may alias a or b. Gloo's reduction function type.
using ReduceFn = void (*)(void* c, const void* a, const void* b, std::size_t n);

// The element-wise function for (type, op); avg reduces with sum (then divideInPlace).
// nullptr when the pair cannot be reduced here (the fp8 types).
ReduceFn ReduceFunction(ncclDataType_t type, ncclRedOp_t op) noexcept;

// buf[i] /= divisor for `count` elements (integer types: truncating division); finishes avg.
void DivideInPlace(void* buf, std::size_t count, ncclDataType_t type, int divisor) noexcept;

// IEEE binary16 and bfloat16 conversions (round to nearest even).
float HalfToFloat(std::uint16_t h) noexcept;
std::uint16_t FloatToHalf(float f) noexcept;
inline float Bfloat16ToFloat(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}
std::uint16_t FloatToBfloat16(float f) noexcept;

}  // namespace metronome::testbed::standin
