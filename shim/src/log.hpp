// Logging for the shim: one line per event on stderr, written with a single write(2) so that
// lines from several processes do not interleave. Never called per collective.
#pragma once

#include <cstdarg>

namespace metronome::shim {

enum class LogLevel : int { kOff = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
bool LogEnabled(LogLevel level);

// printf-style; adds "[metronome <pid>] <level>: " and a newline.
void Log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace metronome::shim

#define MLOG_ERROR(...) ::metronome::shim::Log(::metronome::shim::LogLevel::kError, __VA_ARGS__)
#define MLOG_WARN(...) ::metronome::shim::Log(::metronome::shim::LogLevel::kWarn, __VA_ARGS__)
#define MLOG_INFO(...) ::metronome::shim::Log(::metronome::shim::LogLevel::kInfo, __VA_ARGS__)
#define MLOG_DEBUG(...) ::metronome::shim::Log(::metronome::shim::LogLevel::kDebug, __VA_ARGS__)
