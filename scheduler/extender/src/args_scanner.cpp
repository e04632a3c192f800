// The ExtenderArgs scanner (see args_scanner.hpp).
#include "args_scanner.hpp"

#include <nlohmann/json.hpp>

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

  // A string token, quotes included.
  std::string_view StringToken() {
    if (Peek() != '"') Fail("expected a string");
    const size_t start = i++;
    while (i < s.size()) {
      const char c = s[i];
      if (c == '\\') {
        i += 2;
        continue;
      }
      if (static_cast<unsigned char>(c) < 0x20) Fail("control character in a string");
      ++i;
      if (c == '"') return s.substr(start, i - start);
    }
    Fail("unterminated string");
  }

  static std::string Decode(std::string_view token) {
    if (token.find('\\') == std::string_view::npos) {
      return std::string(token.substr(1, token.size() - 2));
    }
    const nlohmann::json j = nlohmann::json::parse(token, nullptr, false);
    if (!j.is_string()) throw BadRequest("the body is not JSON (bad string escape)");
    return j.get<std::string>();
  }

  // Skips any value; returns its text.
  std::string_view Value() {
    const char c = Peek();
    const size_t start = i;
    if (c == '"') return StringToken();
    if (c == '{' || c == '[') {
      std::string stack;
      while (i < s.size()) {
        const char d = s[i];
        if (d == '"') {
          StringToken();
          continue;
        }
        if (d == '-' || (d >= '0' && d <= '9') || (d >= 'a' && d <= 'z')) {
          Literal();
          continue;
        }
        if (d == '{' || d == '[') {
          stack.push_back(d == '{' ? '}' : ']');
        } else if (d == '}' || d == ']') {
          if (stack.empty() || stack.back() != d) Fail("mismatched bracket");
          stack.pop_back();
          if (stack.empty()) {
            ++i;
            return s.substr(start, i - start);
          }
        }
        ++i;
      }
      Fail("unbalanced brackets");
    }
    Literal();
    return s.substr(start, i - start);
  }

  // A number, true, false or null (numbers checked for their characters only).
  void Literal() {
    const size_t start = i;
    while (i < s.size()) {
      const char d = s[i];
      if (d == ',' || d == '}' || d == ']' || d == ':' || d == ' ' || d == '\n' || d == '\r' ||
          d == '\t') {
        break;
      }
      ++i;
    }
    const std::string_view tok = s.substr(start, i - start);
    if (tok.empty()) Fail("expected a value");
    if (tok == "null" || tok == "true" || tok == "false") return;
    for (const char d : tok) {
      if (!((d >= '0' && d <= '9') || d == '-' || d == '+' || d == '.' || d == 'e' || d == 'E')) {
        Fail("bad literal");
      }
    }
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
