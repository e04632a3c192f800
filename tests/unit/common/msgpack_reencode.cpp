// For the differential check against another msgpack implementation (msgpack_differential.py):
// decodes each file given as a wire message and prints one line per file, tab-separated:
// its path, then "accept" and the hex of Encode(the decoded message), or "reject" and why.
#include <cstdio>
#include <string>

#include "metronome/common/protocol.hpp"

int main(int argc, char** argv) {
  namespace proto = metronome::proto;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 1; i < argc; ++i) {
    std::FILE* f = std::fopen(argv[i], "rb");
    if (f == nullptr) {
      std::fprintf(stderr, "msgpack_reencode: cannot read %s\n", argv[i]);
      return 2;
    }
    std::string bytes;
    char buf[4096];
    for (size_t n = 0; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) bytes.append(buf, n);
    std::fclose(f);
    const proto::Decoded d = proto::Decode(bytes);
    if (!d.Ok()) {
      std::printf("%s\treject\t%s\n", argv[i], d.detail.c_str());
      continue;
    }
    std::string hex;
    for (const char c : proto::Encode(d.message)) {
      hex.push_back(kHex[(static_cast<unsigned char>(c) >> 4) & 0xf]);
      hex.push_back(kHex[static_cast<unsigned char>(c) & 0xf]);
    }
    std::printf("%s\taccept\t%s\n", argv[i], hex.c_str());
  }
  return 0;
}
