# SPDX-License-Identifier: Apache-2.0
"""Conan 2 recipe for datamask, a header-only C++20 library.

Eigen comes from one of two places, chosen by the ``system_eigen`` option:

* ``system_eigen=True`` (default): the recipe requires no Conan package for Eigen. The
  generated ``datamask::datamask`` target finds the system Eigen (Debian: libeigen3-dev)
  through CMake's ``find_package(Eigen3 3.4 CONFIG)`` in a build module shipped with the
  package. This works without any remote, e.g. where ConanCenter cannot be reached.
* ``system_eigen=False``: requires ``eigen/3.4.0`` from ConanCenter, like any other recipe.

``with_openmp`` (default True) makes the target link ``OpenMP::OpenMP_CXX`` when CMake finds
it; the code runs single-threaded without it.

The package holds only headers and small CMake build modules, the same for every option and
setting, so its package ID is cleared; options act in ``requirements`` and ``package_info``.
"""

import os
import re

from conan import ConanFile
from conan.tools.build import check_min_cppstd
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain, cmake_layout
from conan.tools.files import copy, load, rmdir

required_conan_version = ">=2.0"


class DatamaskConan(ConanFile):
    name = "datamask"
    description = "Header-only C++20 selection of LLM pre-training data (CPU backend on Eigen)"
    license = "Apache-2.0"
    topics = ("data-selection", "llm", "header-only", "eigen")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    options = {"system_eigen": [True, False], "with_openmp": [True, False]}
    default_options = {"system_eigen": True, "with_openmp": True}
    exports_sources = "include/*", "cmake/*", "CMakeLists.txt"
    no_copy_source = True

    _build_modules_dir = os.path.join("share", "conan", "datamask")

    def set_version(self):
        text = load(self, os.path.join(self.recipe_folder, "include", "datamask", "version.hpp"))
        parts = []
        for part in ("MAJOR", "MINOR", "PATCH"):
            match = re.search(rf"#define\s+DATAMASK_VERSION_{part}\s+(\d+)", text)
            if not match:
                raise ValueError(f"version.hpp defines no DATAMASK_VERSION_{part}")
            parts.append(match.group(1))
        self.version = ".".join(parts)

    def layout(self):
        cmake_layout(self)

    def requirements(self):
        if not self.options.system_eigen:
            self.requires("eigen/3.4.0")

    def validate(self):
        check_min_cppstd(self, 20)

    def package_id(self):
        self.info.clear()

    def generate(self):
        CMakeToolchain(self).generate()
        CMakeDeps(self).generate()

    def build(self):
        # Configure only to run the project's own install rules in package().
        cmake = CMake(self)
        cmake.configure(variables={
            "DATAMASK_BUILD_TESTS": "OFF",
            "DATAMASK_BUILD_EXAMPLES": "OFF",
            "DATAMASK_BUILD_BENCHMARKS": "OFF",
            # The package is the header-only library; the program (and its CLI11 and
            # nlohmann-json dependencies) is not part of it.
            "DATAMASK_BUILD_PROGRAM": "OFF",
            "DATAMASK_INSTALL": "ON",
        })

    def package(self):
        CMake(self).install()
        # Conan consumers get datamask-config.cmake from CMakeDeps, built from package_info;
        # the project's own config would be a second, conflicting definition of the target.
        rmdir(self, os.path.join(self.package_folder, "share", "cmake"))
        copy(self, "*.cmake", os.path.join(self.source_folder, "cmake", "conan"),
             os.path.join(self.package_folder, self._build_modules_dir))

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "datamask")
        self.cpp_info.set_property("cmake_target_name", "datamask::datamask")
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []

        # What CMake's own exported target carries and cpp_info cannot say: the C++20
        # requirement, the system Eigen, OpenMP.
        modules = ["datamask-conan-requirements.cmake"]
        if self.options.system_eigen:
            modules.append("datamask-conan-system-eigen.cmake")
        if self.options.with_openmp:
            modules.append("datamask-conan-openmp.cmake")
        self.cpp_info.set_property(
            "cmake_build_modules", [os.path.join(self._build_modules_dir, m) for m in modules])
