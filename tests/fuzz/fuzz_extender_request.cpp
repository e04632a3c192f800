// libFuzzer target for the kube-scheduler extender's request bodies (the filter and prioritize
// routes): the first byte picks the verb, the rest is the body. Properties checked on every
// input: the handler returns (never throws, never reads out of bounds: ASan), with 200 or 400,
// and its body is JSON; a 400 says why. Each input meets a fresh extender: one kept across
// inputs learned every node name they carried (up to 100,000), rebuilding a snapshot that grew
// with them, so a campaign slowed from 3,000 to 500 executions a second and a failure could
// depend on the inputs before it.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "metronome/extender/extender.hpp"
#include "metronome/models/model_table.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The model table is read once (it is constant); the extender's state is per input.
  static const auto models = std::make_shared<const metronome::models::ModelTable>(
      metronome::models::ModelTable::LoadDefault());
  if (size == 0) return 0;
  metronome::extender::Extender extender({}, models);
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const metronome::extender::ExtenderResponse r =
      data[0] % 2 == 0 ? extender.HandleFilter(body) : extender.HandlePrioritize(body);
  const nlohmann::json reply = nlohmann::json::parse(r.body, nullptr, false);
  const char* broken = nullptr;
  if (r.status != 200 && r.status != 400) {
    broken = "status is neither 200 nor 400";
  } else if (reply.is_discarded()) {
    broken = "reply is not JSON";
  } else if (r.status == 400 && !reply.contains("error")) {
    broken = "400 without an error";
  }
  if (broken != nullptr) {
    std::fprintf(stderr, "fuzz_extender_request: %s: status %d, body (%zu bytes):\n", broken,
                 r.status, r.body.size());
    std::fwrite(r.body.data(), 1, r.body.size(), stderr);
    std::fputc('\n', stderr);
    std::abort();
  }
  return 0;
}
