#include "real_nccl.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "log.hpp"

namespace metronome::shim {

std::atomic<void*> g_real_fns[static_cast<int>(Fn::kCount)];

namespace {

const char* const kNames[] = {
#define METRONOME_FN_NAME(name) #name,
    METRONOME_NCCL_FUNCTIONS(METRONOME_FN_NAME)
#undef METRONOME_FN_NAME
};

std::atomic<bool> g_missing_logged[static_cast<int>(Fn::kCount)];
std::atomic<bool> g_overridden[static_cast<int>(Fn::kCount)];
char g_source[512];
std::mutex g_source_mu;

int ShimAnchor() {
  return 0;
}

void* TryHandle(void* handle, const char* sym) {
  if (handle == nullptr) return nullptr;
  void* p = dlsym(handle, sym);
  if (p != nullptr && AddressIsInShim(p)) return nullptr;
  return p;
}

void NoteSource(void* p) {
  Dl_info info{};
  if (dladdr(p, &info) == 0 || info.dli_fname == nullptr) return;
  std::lock_guard<std::mutex> lock(g_source_mu);
  if (g_source[0] != '\0') return;
  std::strncpy(g_source, info.dli_fname, sizeof(g_source) - 1);
  MLOG_INFO("real NCCL functions come from %s", g_source);
}

}  // namespace

bool AddressIsInShim(const void* addr) noexcept {
  static Dl_info self{};
  static const bool kHave = dladdr(reinterpret_cast<void*>(&ShimAnchor), &self) != 0;
  if (!kHave || addr == nullptr) return false;
  Dl_info other{};
  if (dladdr(addr, &other) == 0) return false;
  return other.dli_fbase == self.dli_fbase;
}

void* ResolveReal(Fn f) noexcept {
  const int i = static_cast<int>(f);
  if (i < 0 || i >= static_cast<int>(Fn::kCount)) return nullptr;
  if (g_overridden[i].load()) return g_real_fns[i].load();
  char pname[64];
  char name[64];
  std::snprintf(pname, sizeof(pname), "pnccl%s", kNames[i]);
  std::snprintf(name, sizeof(name), "nccl%s", kNames[i]);
  void* p = nullptr;
  // 1. The libnccl.so.2 already in the process.
  void* loaded = dlopen("libnccl.so.2", RTLD_NOLOAD | RTLD_LAZY);
  if (loaded != nullptr) {
    p = TryHandle(loaded, pname);
    if (p == nullptr) p = TryHandle(loaded, name);
    dlclose(loaded);  // drops the reference NOLOAD took; the library stays loaded
  }
  // 2. The next object in the lookup order.
  if (p == nullptr) p = TryHandle(RTLD_NEXT, pname);
  if (p == nullptr) p = TryHandle(RTLD_NEXT, name);
  // 3. The library named by the user.
  if (p == nullptr) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): Metronome never calls setenv
    const char* lib = std::getenv("METRONOME_NCCL_LIBRARY");
    if (lib != nullptr && *lib != '\0') {
      void* h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
      if (h != nullptr) {
        p = TryHandle(h, pname);
        if (p == nullptr) p = TryHandle(h, name);
      } else if (!g_missing_logged[i].load()) {
        // NOLINTNEXTLINE(concurrency-mt-unsafe): glibc keeps dlerror's message per thread.
        const char* err = dlerror();
        MLOG_ERROR("METRONOME_NCCL_LIBRARY=%s cannot be loaded: %s", lib, err ? err : "?");
      }
    }
  }
  if (p == nullptr) {
    if (!g_missing_logged[i].exchange(true)) {
      MLOG_ERROR(
          "%s: no NCCL in this process provides %s (older NCCL?): returning "
          "ncclInternalError",
          name, pname);
    }
    return nullptr;
  }
  NoteSource(p);
  g_real_fns[i].store(p, std::memory_order_release);
  return p;
}

void OverrideReal(Fn f, void* p) noexcept {
  const int i = static_cast<int>(f);
  g_overridden[i].store(p != nullptr);
  g_real_fns[i].store(p, std::memory_order_release);
}

const char* RealNcclSource() noexcept {
  return g_source;
}

void DetectStaticNccl() noexcept {
  void* self = dlopen(nullptr, RTLD_LAZY | RTLD_NOLOAD);
  if (self == nullptr) return;
  // A libnccl.so.2 exports ncclX and pncclX; a program or library that carries NCCL statically
  // either hides them (nothing to find) or exports them from an object not named libnccl.
  for (const char* sym : {"pncclAllReduce", "ncclCommInitRank"}) {
    void* s = dlsym(self, sym);
    Dl_info info{};
    if (s == nullptr || AddressIsInShim(s) || dladdr(s, &info) == 0) continue;
    const char* file = info.dli_fname != nullptr ? info.dli_fname : "";
    if (std::strstr(file, "libnccl") == nullptr) {
      MLOG_WARN(
          "NCCL appears to be linked statically into '%s' (it exports %s): calls made "
          "inside it cannot be intercepted",
          *file ? file : "the program", sym);
      break;
    }
  }
  dlclose(self);
}

}  // namespace metronome::shim
