// SPDX-License-Identifier: Apache-2.0
//
// Replays the fuzz target's entry point over files (the seed corpus, or crash reproducers), so
// the ctest suite exercises it with the project's own compiler, without libFuzzer.

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  int ran = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "replay: cannot open %s\n", argv[i]);
      return 1;
    }
    const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    ++ran;
    // Every prefix too: truncations are the most common corruption.
    for (std::size_t n = 0; n < bytes.size(); n += 1 + bytes.size() / 64) LLVMFuzzerTestOneInput(bytes.data(), n);
  }
  std::printf("replayed %d inputs\n", ran);
  return ran > 0 ? 0 : 1;
}
