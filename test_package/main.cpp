// SPDX-License-Identifier: Apache-2.0
//
// The smallest program a user of the installed package writes. It must print
// "datamask <version>" (the install test checks it) and exit 0.
#include <datamask/datamask.hpp>

#include <cstdio>

int main() {
  std::printf("datamask %s\n", datamask::version_string);

  // ---- CONSUMER-SELECTION: a real selection call goes here (core engineer) ----
  // Select a few rows from a tiny in-memory matrix through the public API and return
  // non-zero if the result is not what the API promises. Keep test_package/main.cpp identical.
  // ---- end CONSUMER-SELECTION ----

  return 0;
}
