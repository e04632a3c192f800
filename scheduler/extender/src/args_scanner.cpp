// The ExtenderArgs scanner (see args_scanner.hpp).
#include "args_scanner.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <system_error>

#include "metronome/common/utf8.hpp"

namespace metronome::extender {

namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view text) : s(text) {}

  [[noreturn]] void Fail(const std::string& what) const {
    throw BadRequest("the body is not JSON (" + what + " at byte " + std::to_string(i) + ")");
  }

  void Ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) {
      ++i;
    }
  }
  bool AtEnd() {
    Ws();
    return i >= s.size();
  }
  char Peek() {
    Ws();
    if (i >= s.size()) Fail("unexpected end");
    return s[i];
  }
  void Expect(char c) {
    if (Peek() != c) Fail(std::string("expected '") + c + "'");
    ++i;
  }

  // A string token, quotes included: escapes and UTF-8 checked as a JSON parser checks them
  // (a node's text goes back to kube-scheduler as it came, so it must be JSON).
  std::string_view StringToken() {
    if (Peek() != '"') Fail("expected a string");
    const size_t start = i++;
    while (i < s.size()) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c == '"') {
        ++i;
        return s.substr(start, i - start);
      }
      if (c == '\\') {
        Escape();
      } else if (c < 0x20) {
        Fail("control character in a string");
      } else if (c < 0x80) {
        ++i;
      } else {
        Utf8();
      }
    }
    Fail("unterminated string");
  }

  // One escape sequence at s[i] == '\\'; a \u escape of a high surrogate must be followed by
  // one of a low surrogate, and a low surrogate must not come alone.
  void Escape() {
    if (i + 1 >= s.size()) Fail("unterminated string");
    const char e = s[i + 1];
    if (e != 'u') {
      if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' &&
          e != 't') {
        Fail("bad escape in a string");
      }
      i += 2;
      return;
    }
    const unsigned unit = Hex4(i + 2);
    i += 6;
    if (unit >= 0xDC00 && unit <= 0xDFFF) Fail("lone surrogate in a string");
    if (unit >= 0xD800 && unit <= 0xDBFF) {
      if (i + 1 >= s.size() || s[i] != '\\' || s[i + 1] != 'u') {
        Fail("lone surrogate in a string");
      }
      const unsigned low = Hex4(i + 2);
      if (low < 0xDC00 || low > 0xDFFF) Fail("lone surrogate in a string");
      i += 6;
    }
  }

  unsigned Hex4(size_t at) const {
    if (at + 4 > s.size()) Fail("bad \\u escape in a string");
    unsigned v = 0;
    for (size_t k = at; k < at + 4; ++k) {
      const char h = s[k];
      v <<= 4;
      if (h >= '0' && h <= '9') {
        v |= static_cast<unsigned>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        v |= static_cast<unsigned>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        v |= static_cast<unsigned>(h - 'A' + 10);
      } else {
        Fail("bad \\u escape in a string");
      }
    }
    return v;
  }

  // One multi-byte UTF-8 sequence at s[i].
  void Utf8() {
    const size_t len =
        Utf8SequenceLength(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i);
    if (len == 0) Fail("invalid UTF-8 in a string");
    i += len;
  }

  static std::string Decode(std::string_view token) {
    if (token.find('\\') == std::string_view::npos) {
      return std::string(token.substr(1, token.size() - 2));
    }
    const nlohmann::json j = nlohmann::json::parse(token, nullptr, false);
    if (!j.is_string()) throw BadRequest("the body is not JSON (bad string escape)");
    return j.get<std::string>();
  }

  // Skips any value, checking it as a JSON parser would; returns its text. Nesting deeper than
  // kMaxDepth is refused (the scan recurses once per level).
  static constexpr int kMaxDepth = 128;
  std::string_view Value(int depth = 0) {
    const char c = Peek();
    const size_t start = i;
    if (c == '"') return StringToken();
    if (c == '{' || c == '[') {
      if (depth >= kMaxDepth) Fail("nesting deeper than 128");
      if (c == '{') {
        Object([&](std::string_view) { Value(depth + 1); });
      } else {
        Array([&](size_t) { Value(depth + 1); });
      }
      return s.substr(start, i - start);
    }
    Literal();
    return s.substr(start, i - start);
  }

  // true, false, null, or a number as JSON writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
  void Literal() {
    for (const std::string_view word : {"true", "false", "null"}) {
      if (s.substr(i, word.size()) == word) {
        i += word.size();
        return;
      }
    }
    const auto digit = [&] { return i < s.size() && s[i] >= '0' && s[i] <= '9'; };
    const auto digits = [&] {
      if (!digit()) Fail("bad number");
      while (digit()) ++i;
    };
    const size_t start = i;
    if (i < s.size() && s[i] == '-') ++i;
    const size_t int_begin = i;
    if (i < s.size() && s[i] == '0') {
      ++i;
    } else if (digit()) {
      digits();
    } else {
      Fail("expected a value");
    }
    const size_t int_end = i;
    size_t frac_begin = i;
    if (i < s.size() && s[i] == '.') {
      ++i;
      frac_begin = i;
      digits();
    }
    const size_t frac_end = i;
    size_t exp_begin = i;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      ++i;
      exp_begin = i;
      if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
      digits();
    }
    // JSON's grammar has no bound on a number, but JSON parsers do (RFC 8259, section 6): one
    // beyond a double's largest is refused (number overflow), so a node that holds one would not
    // go back as JSON its reader takes (the fuzz target found 3e0229262). One below a double's
    // least is read as 0 or a subnormal, and kept. Only an exponent or over 300 digits can get
    // out of range; from_chars (no locale) says so for overflow and underflow alike, and the
    // number's decimal magnitude tells them apart.
    if (exp_begin != i || i - start > 300) {
      double value = 0.0;
      const auto r = std::from_chars(s.data() + start, s.data() + i, value);
      if (r.ec == std::errc::result_out_of_range &&
          Magnitude(s.substr(int_begin, int_end - int_begin),
                    s.substr(frac_begin, frac_end - frac_begin),
                    s.substr(exp_begin, i - exp_begin)) > 0) {
        Fail("number beyond a double's range");
      }
    }
  }

  // The decimal magnitude of digits.fraction × 10^exponent: the power of ten just above it
  // (1e309 and 1000e306 give 310; 1e-400 gives −399). Only its sign is used.
  static int64_t Magnitude(std::string_view integer, std::string_view fraction,
                           std::string_view exponent) {
    int64_t mag = 0;
    const size_t lead = integer.find_first_not_of('0');
    if (lead != std::string_view::npos) {
      mag = static_cast<int64_t>(integer.size() - lead);
    } else {
      const size_t zeros = fraction.find_first_not_of('0');
      if (zeros == std::string_view::npos) return 0;  // the number is 0
      mag = -static_cast<int64_t>(zeros);
    }
    int64_t e = 0;
    const bool negative = !exponent.empty() && exponent.front() == '-';
    for (const char c : exponent) {
      if (c >= '0' && c <= '9') e = std::min<int64_t>(e * 10 + (c - '0'), 1'000'000'000);
    }
    return mag + (negative ? -e : e);
  }

  // Members of the object starting here: fn(key token, scanner positioned at the value) must
  // consume the value.
  template <typename Fn>
  void Object(Fn&& fn) {
    Expect('{');
    if (Peek() == '}') {
      ++i;
      return;
    }
    while (true) {
      const std::string_view key = StringToken();
      Expect(':');
      fn(key);
      const char c = Peek();
      ++i;
      if (c == '}') return;
      if (c != ',') Fail("expected ',' or '}'");
    }
  }

  template <typename Fn>
  void Array(Fn&& fn) {
    Expect('[');
    if (Peek() == ']') {
      ++i;
      return;
    }
    for (size_t k = 0;; ++k) {
      fn(k);
      const char c = Peek();
      ++i;
      if (c == ']') return;
      if (c != ',') Fail("expected ',' or ']'");
    }
  }

  bool IsNull() {
    if (Peek() == 'n' && s.substr(i, 4) == "null") {
      i += 4;
      return true;
    }
    return false;
  }

  std::string_view s;
  size_t i = 0;
};

}  // namespace

ScannedArgs ScanArgs(std::string_view body) {
  Scanner sc(body);
  ScannedArgs out;
  if (sc.AtEnd()) throw BadRequest("the body is not JSON (empty)");
  if (sc.Peek() != '{') {
    sc.Value();  // a malformed body is "not JSON" rather than "not an object"
    if (!sc.AtEnd()) sc.Fail("trailing characters");
    throw BadRequest("ExtenderArgs must be a JSON object");
  }
  sc.Object([&](std::string_view key) {
    if (key == "\"Pod\"") {
      out.pod = sc.IsNull() ? std::string_view() : sc.Value();
    } else if (key == "\"Nodes\"") {
      if (sc.IsNull()) return;
      if (sc.Peek() != '{') {
        sc.Value();
        throw BadRequest("ExtenderArgs.Nodes must be a NodeList object");
      }
      out.has_nodes = true;
      sc.Object([&](std::string_view list_key) {
        if (list_key != "\"items\"" || sc.IsNull()) {
          if (list_key == "\"items\"") return;
          sc.Value();
          return;
        }
        if (sc.Peek() != '[') {
          sc.Value();
          throw BadRequest("ExtenderArgs.Nodes.items must be a list");
        }
        sc.Array([&](size_t k) {
          ScannedNode node;
          const size_t start = (sc.Ws(), sc.i);
          const auto missing = [&] {
            return BadRequest("ExtenderArgs.Nodes.items[" + std::to_string(k) +
                              "] has no metadata.name");
          };
          if (sc.Peek() != '{') {
            sc.Value();
            throw missing();
          }
          sc.Object([&](std::string_view node_key) {
            if (node_key != "\"metadata\"" || sc.Peek() != '{') {
              sc.Value();
              return;
            }
            sc.Object([&](std::string_view meta_key) {
              if (meta_key == "\"name\"" && sc.Peek() == '"') {
                node.name = Scanner::Decode(sc.StringToken());
              } else if (meta_key == "\"labels\"" && sc.Peek() == '{') {
                node.labels = sc.Value();
              } else {
                sc.Value();
              }
            });
          });
          if (node.name.empty()) throw missing();
          node.raw = body.substr(start, sc.i - start);
          out.nodes.push_back(std::move(node));
        });
      });
    } else if (key == "\"NodeNames\"") {
      if (sc.IsNull()) return;
      const std::string_view text = sc.Value();
      const nlohmann::json names = nlohmann::json::parse(text, nullptr, false);
      if (!names.is_array()) throw BadRequest("ExtenderArgs.NodeNames must be a list of names");
      out.has_names = true;
      out.names.reserve(names.size());
      for (size_t k = 0; k < names.size(); ++k) {
        if (!names[k].is_string() || names[k].get_ref<const std::string&>().empty()) {
          throw BadRequest("ExtenderArgs.NodeNames[" + std::to_string(k) + "] is not a name");
        }
        out.names.push_back(names[k].get<std::string>());
      }
    } else {
      sc.Value();
    }
  });
  if (!sc.AtEnd()) sc.Fail("trailing characters");
  return out;
}

NodeLabels DecodeLabels(std::string_view text) {
  NodeLabels out;
  if (text.empty()) return out;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items()) {
    if (v.is_string()) out.emplace(k, v.get<std::string>());
  }
  return out;
}

}  // namespace metronome::extender
