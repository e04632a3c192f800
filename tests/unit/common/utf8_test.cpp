// RFC 3629 UTF-8: what IsUtf8 accepts and refuses, at the edges of each range.
#include "metronome/common/utf8.hpp"

#include <gtest/gtest.h>

#include <string>

namespace metronome {
namespace {

TEST(Utf8, AcceptsEveryRangeAtItsEdges) {
  for (const std::string& ok :
       {std::string(""), std::string("plain ascii"), std::string("\x7f"), std::string("\xc2\x80"),
        std::string("\xdf\xbf"),                                   // 2 bytes
        std::string("\xe0\xa0\x80"), std::string("\xed\x9f\xbf"),  // 3 bytes, below surrogates
        std::string("\xee\x80\x80"), std::string("\xef\xbf\xbf"),  // 3 bytes, above them
        std::string("\xf0\x90\x80\x80"), std::string("\xf4\x8f\xbf\xbf"),  // 4 bytes to U+10FFFF
        std::string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80")}) {
    EXPECT_TRUE(IsUtf8(ok)) << ok;
  }
}

TEST(Utf8, RefusesOverlongSurrogatesOutOfRangeAndCutSequences) {
  for (const std::string& bad :
       {std::string("\x80"), std::string("\xbf"),                           // a continuation alone
        std::string("\xc0\xaf"), std::string("\xc1\xbf"),                   // overlong 2 bytes
        std::string("\xe0\x9f\xbf"),                                        // overlong 3 bytes
        std::string("\xed\xa0\x80"), std::string("\xed\xbf\xbf"),           // surrogates
        std::string("\xf0\x8f\xbf\xbf"),                                    // overlong 4 bytes
        std::string("\xf4\x90\x80\x80"), std::string("\xf5\x80\x80\x80"),   // above U+10FFFF
        std::string("\xff"), std::string("\xc3"), std::string("\xe2\x82"),  // cut short
        std::string("a\xc3(b"), std::string("\xe2\x28\xa1")}) {             // bad continuation
    EXPECT_FALSE(IsUtf8(bad)) << testing::PrintToString(bad);
  }
}

}  // namespace
}  // namespace metronome
