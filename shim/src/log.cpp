#include "log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace metronome::shim {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kOff:
      break;
  }
  return "?";
}
}  // namespace

void SetLogLevel(LogLevel level) {
  g_level.store(static_cast<int>(level));
}
LogLevel GetLogLevel() {
  return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed));
}
bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed) &&
         level != LogLevel::kOff;
}

void Log(LogLevel level, const char* fmt, ...) {
  if (!LogEnabled(level)) return;
  char buf[512];
  int n = std::snprintf(buf, sizeof(buf), "[metronome %d] %s: ", static_cast<int>(getpid()),
                        LevelName(level));
  if (n < 0) return;
  size_t used = static_cast<size_t>(n) < sizeof(buf) ? static_cast<size_t>(n) : sizeof(buf) - 1;
  va_list ap;
  va_start(ap, fmt);
  // va_start above initializes ap; the analyzer loses it on one path of `used` (a false report).
  // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized)
  const int m = std::vsnprintf(buf + used, sizeof(buf) - used, fmt, ap);
  va_end(ap);
  if (m > 0) used += static_cast<size_t>(m);
  if (used > sizeof(buf) - 2) used = sizeof(buf) - 2;
  buf[used++] = '\n';
  const ssize_t w = ::write(2, buf, used);
  (void)w;
}

}  // namespace metronome::shim
