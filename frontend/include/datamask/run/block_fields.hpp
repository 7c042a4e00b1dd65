// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The fields of a block's record (and of f and a certificate), in the report's order,
/// for every writer of them: the JSON report (run/report.hpp) and the Python module's dicts, so
/// that both say the same things under the same names.
///
/// A writer `w` has `w.value(name, v)`, v an integer, a double (a writer writes a non-finite one
/// as null), a bool, a std::string, or std::nullopt (null); and `w.object(name, f)`, which calls
/// `f(w2)` with a writer of a nested object (empty when f writes nothing).

#include <optional>
#include <string>
#include <vector>

#include "datamask/run/pipeline.hpp"

namespace datamask::io {

/// @brief f: its total, then each term by name (raw, scale, weight, constant).
template <class W>
void visit_objective_fields(const std::vector<term_value>& terms, double total, W& w) {
  w.value("total", total);
  w.object("terms", [&](auto& ts) {
    for (const auto& t : terms) {
      ts.object(t.name, [&](auto& o) {
        o.value("raw", t.raw);
        o.value("scale", t.scale);
        o.value("weight", t.weight);
        o.value("constant", t.constant);
      });
    }
  });
}

/// @brief A certificate: its method, its numbers (`for_each_certificate_number`), and why there
/// is none (only with method "none").
template <class W>
void visit_certificate_fields(const block_certificate& c, W& w) {
  w.value("method", c.method);
  for_each_certificate_number(c, [&](const char* name, double v) { w.value(name, v); });
  if (!c.certified()) w.value("reason", c.reason);
}

/// @brief A block's record (its ids and history are written elsewhere): the graph only for a
/// block whose facility term ran on a kNN graph, the certificate only for a certified run.
template <class W>
void visit_block_fields(const block_result& b, W& w) {
  w.value("block", b.block);
  w.value("items", b.items);
  w.value("kept", b.kept);
  w.value("selected", b.selected);
  if (b.optimizer.empty()) {  // a block that selects nothing runs none
    w.value("optimizer", std::nullopt);
  } else {
    w.value("optimizer", b.optimizer);
  }
  w.value("steps_run", b.steps_run);
  w.value("zero_variance_steps", b.zero_variance_steps);
  w.value("nonfinite_steps", b.nonfinite_steps);
  w.value("from_checkpoint", b.from_checkpoint);
  w.object("seconds", [&](auto& s) {
    s.value("optimize", b.optimize_seconds);
    s.value("evaluate", b.evaluate_seconds);
  });
  w.object("objective", [&](auto& o) { visit_objective_fields(b.terms, b.objective, o); });
  if (b.graph.neighbors > 0) {
    w.object("graph", [&](auto& g) {
      g.value("neighbors", b.graph.neighbors);
      g.value("source", b.graph.source);
      g.value("seconds", b.graph.seconds);
      g.value("bytes", b.graph.bytes);
      if (b.graph.recall) g.value("recall", *b.graph.recall);
    });
  }
  if (b.certificate) w.object("certificate", [&](auto& c) { visit_certificate_fields(*b.certificate, c); });
}

}  // namespace datamask::io
