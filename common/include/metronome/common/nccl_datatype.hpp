// Element size of an NCCL data type, for the code built against nccl.h (the shim and the CPU
// stand-in). Header-only: the common library itself does not depend on NCCL.
#pragma once

#include <nccl.h>

#include <cstddef>

namespace metronome {

// 0 for a value that names no type of this nccl.h (each caller decides what that means).
constexpr std::size_t NcclTypeSize(ncclDataType_t type) noexcept {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

}  // namespace metronome
