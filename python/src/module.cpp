// SPDX-License-Identifier: Apache-2.0
//
// datamask._core: the Python binding of the library (nanobind). It holds no selection logic:
// the corpus plan, each block's selection and its evaluation are the library's
// (datamask/run/block_select.hpp), called exactly as datamask-select calls them, so the same inputs,
// options and seed give the same ids. Here: numpy arrays viewed without a copy, options applied
// through the library's settings table, the GIL released while selecting, progress and Ctrl-C
// through the library's hooks, and the result as Python objects. The blocks run on the backend
// this module was built for (block_backend.hpp: the CPU, or the GPU through a translation unit
// nvcc compiles), exactly as the program's do.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

#include <datamask/run/block_select.hpp>
#include <datamask/datamask.hpp>
#include <datamask/core/input_checks.hpp>
#include <datamask/run/block_fields.hpp>
#include <datamask/run/pipeline.hpp>
#include <datamask/core/synthetic.hpp>

#include <datamask/frontend/block_backend.hpp>
#include <datamask/frontend/corpus.hpp>
#include <datamask/frontend/registry.hpp>
#include <datamask/frontend/request.hpp>

namespace nb = nanobind;
using namespace nb::literals;
using datamask::index_t;
using datamask::invalid_input;

namespace {

/// Any 2-D C-contiguous CPU array, accepted as it is (never converted here: the Python layer
/// converts what is neither float32 nor float16, once, before the call).
using shard_array = nb::ndarray<nb::ro, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
/// A shard as datamask/__init__.py passes it: its array, or its (rows, cols) alone for a shard
/// another worker reads (`datamask.Shards` with worker=: its values are never loaded here).
using shard_arg = std::variant<shard_array, std::pair<index_t, index_t>>;

index_t shard_rows(const shard_arg& s) {
  if (const auto* shape = std::get_if<std::pair<index_t, index_t>>(&s)) return shape->first;
  return static_cast<index_t>(std::get<shard_array>(s).shape(0));
}
using column_array = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
/// Ids: int64 or uint64 (datamask/__init__.py converts any other integer type to one of them).
using ids_array = nb::ndarray<nb::ro, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
/// graph=(ids, sims) as datamask/__init__.py passes it (any dimensions: the shapes are checked here).
using graph_arrays = std::pair<nb::ndarray<const std::int64_t, nb::c_contig, nb::device::cpu>,
                               nb::ndarray<const double, nb::c_contig, nb::device::cpu>>;

/// The corpus of one call: views of the caller's arrays (kept alive by the caller's frame); the
/// quality columns copied (the blocks gather them anyway).
using corpus = dmfront::corpus;

/// The 64 bits of each id of an int64 or uint64 array (`is_unsigned`: which it is); refuses
/// another dtype naming `name`.
std::span<const datamask::id_t> id_bits(const ids_array& a, const std::string& name, bool& is_unsigned) {
  is_unsigned = a.dtype() == nb::dtype<std::uint64_t>();
  DATAMASK_EXPECTS(is_unsigned || a.dtype() == nb::dtype<std::int64_t>(), name, "expected int64 or uint64 ids");
  return {static_cast<const datamask::id_t*>(a.data()), a.shape(0)};
}

std::string shard_name(std::size_t i, std::size_t count) {
  return count == 1 ? std::string("embeddings") : "embeddings[" + std::to_string(i) + "]";
}

/// Views and checks the inputs: the messages name the argument as the Python call gave it
/// (`ids_name`: "ids" for select, "corpus_ids" for evaluate). The finiteness scan releases the GIL.
/// A worker's share of a corpus given whole (`datamask.select(worker=...)`): worker `rank` of
/// `world` runs the blocks `datamask::worker_blocks` gives it; `rows` are the rows whose scores
/// and ids the call passed (its groups', or every row when it plans the corpus itself).
struct worker_share {
  index_t rank = 0, world = 1;
  std::pair<index_t, index_t> rows{0, -1};  // -1: every row
  /// Scan the worker's shards for values that are not finite; false for the plan, which reads
  /// the calibration sample's rows only and checks each as it reads it (`dmfront::calibrate_corpus`).
  bool check_values = true;
};

/// The layout of shards of `rows` rows each in blocks of `block_size`, and worker `rank` of
/// `world`'s groups [first, last) in it.
std::pair<datamask::corpus_layout, std::pair<index_t, index_t>> worker_groups(const std::vector<index_t>& rows,
                                                                           index_t block_size, index_t rank, index_t world) {
  DATAMASK_EXPECTS(block_size >= 2, "block_size", "must be at least 2, found ", block_size);
  DATAMASK_EXPECTS(world >= 1 && rank >= 0 && rank < world, "worker", "(", rank, ", ", world,
                   "): needs 0 <= rank < world size");
  datamask::corpus_layout l = datamask::layout_corpus(rows, block_size);
  const auto groups = datamask::groups_of_blocks(l, datamask::worker_blocks(l.blocks(), rank, world));
  return {std::move(l), groups};
}

corpus make_corpus(const std::vector<shard_arg>& shards, const std::vector<column_array>& quality,
                   const std::vector<double>& quality_weights, const std::optional<ids_array>& ids,
                   const std::string& ids_name, int threads, const worker_share& share = {}, index_t block_size = 2,
                   const std::vector<std::string>& names = {}) {
  corpus k;
  // A worker checks the values of its groups' shards only (the others' workers check theirs).
  std::pair<std::size_t, std::size_t> checked{0, share.check_values ? shards.size() : 0};
  if (share.world > 1) {
    std::vector<index_t> rows;
    for (const auto& a : shards) rows.push_back(shard_rows(a));
    const auto [l, g] = worker_groups(rows, block_size, share.rank, share.world);
    checked = {static_cast<std::size_t>(l.group_file[static_cast<std::size_t>(g.first)]),
               static_cast<std::size_t>(l.group_file[static_cast<std::size_t>(g.second)])};
  }
  DATAMASK_EXPECTS(!shards.empty(), "embeddings", "no arrays were given");
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = i < names.size() ? names[i] : shard_name(i, shards.size());
    if (const auto* shape = std::get_if<std::pair<index_t, index_t>>(&shards[i])) {
      const auto [rows, cols] = *shape;
      DATAMASK_EXPECTS(share.rows.second >= 0 && (i < checked.first || i >= checked.second), name,
                       "was given as its shape alone, but this call reads its values");
      DATAMASK_EXPECTS(rows > 0 && cols > 0, name, "empty array (", rows, " x ", cols, ")");
      DATAMASK_EXPECTS(k.d == 0 || cols == k.d, name, "has ", cols, " columns, but embeddings[0] has ", k.d,
                       "; every shard needs the same d");
      k.add_shard(nullptr, datamask::element_kind::float32, rows, cols, name);
      continue;
    }
    const shard_array& a = std::get<shard_array>(shards[i]);
    const auto dt = a.dtype();
    const bool f32 = dt == nb::dtype<float>();
    const bool f16 = dt.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float) && dt.bits == 16 && dt.lanes == 1;
    // bfloat16 arrives as its bits: NumPy has no bfloat16, and datamask's Python layer passes
    // ml_dtypes' arrays (a 2-byte void dtype) as a uint16 view.
    const bool bf16 = dt.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt) && dt.bits == 16 && dt.lanes == 1;
    DATAMASK_EXPECTS(f32 || f16 || bf16, name, "unsupported dtype; expected float32, float16 or bfloat16 bits (uint16)");
    const datamask::element_kind kind = f16    ? datamask::element_kind::float16
                                        : bf16 ? datamask::element_kind::bfloat16
                                               : datamask::element_kind::float32;
    const auto rows = static_cast<index_t>(a.shape(0));
    const auto cols = static_cast<index_t>(a.shape(1));
    DATAMASK_EXPECTS(rows > 0 && cols > 0, name, "empty array (", rows, " x ", cols, ")");
    DATAMASK_EXPECTS(k.d == 0 || cols == k.d, name, "has ", cols, " columns, but embeddings[0] has ", k.d,
                     "; every shard needs the same d");
    if (i >= checked.first && i < checked.second) {
      nb::gil_scoped_release nogil;
      datamask::check_finite_values(
          name, {static_cast<const unsigned char*>(a.data()), a.nbytes()}, kind, cols, threads);
    }
    k.add_shard(a.data(), kind, rows, cols, name);
  }
  k.close_shards();
  if (share.rows.second >= 0) k.hold(share.rows.first, share.rows.second);
  const std::string rows_of = "the embeddings";
  for (std::size_t c = 0; c < quality.size(); ++c) {
    const column_array& q = quality[c];
    k.add_quality(quality.size() == 1 ? std::string("quality") : "quality[" + std::to_string(c) + "]",
                  {q.data(), q.data() + q.shape(0)}, rows_of);
  }
  k.weigh_quality(quality_weights, "quality_weights");
  if (ids) {
    bool is_unsigned = false;
    const auto bits = id_bits(*ids, ids_name, is_unsigned);
    k.view_ids(bits, is_unsigned, ids_name, rows_of);
  }
  return k;
}

// --- options: the library's settings table ------------------------------------------------------

/// The Python keyword of a table entry: its command-line name with '_' for '-'.
std::string keyword(std::string_view name) {
  std::string k(name);
  std::replace(k.begin(), k.end(), '-', '_');
  return k == "lambda" ? std::string("lam") : k;
}

/// How Python calls spell an option in messages: its keyword, and `keyword="value"`.
const dmfront::spelling& python_spelling() {
  static const dmfront::spelling sp{
      [](std::string_view name) { return keyword(name); },
      [](std::string_view name, std::string_view value, bool text) {
        return keyword(name) + "=" + (text ? "\"" + std::string(value) + "\"" : std::string(value));
      }};
  return sp;
}

template <class Entry>
nb::object value_object(const Entry& s, const datamask::block_run_settings& r) {
  const auto& v = datamask::settings_of<Entry>(r).*s.member;
  if constexpr (Entry::kind == datamask::setting_kind::choice) {
    return nb::str(std::string(datamask::enum_name(v)).c_str());
  } else {
    return nb::cast(v);
  }
}

/// The table as Python sees it: keyword -> (help, default, range, choices, group).
nb::list settings_table() {
  nb::list out;
  const datamask::block_run_settings defaults;
  dmfront::visit_options([&](const auto& s) {
    using entry = std::remove_cvref_t<decltype(s)>;
    nb::dict e;
    e["keyword"] = keyword(s.name);
    e["option"] = "--" + std::string(s.name);
    e["field"] = std::string(s.field);
    e["help"] = std::string(s.help);
    e["default"] = value_object(s, defaults);
    e["range"] = s.range_text();
    nb::list choices;
    if constexpr (entry::kind == datamask::setting_kind::choice) {
      for (const auto& c : s.choices) choices.append(std::string(c.name));
    }
    e["choices"] = choices;
    e["continuous_only"] = dmfront::applies_to(s.name) == 1u << static_cast<unsigned>(datamask::block_optimizer::continuous);
    e["pg_only"] = dmfront::applies_to(s.name) == 1u << static_cast<unsigned>(datamask::block_optimizer::pg);
    out.append(e);
  });
  return out;
}

/// A bound of an integer setting as messages say it: its type's limits as powers of two.
template <class T>
std::string bound_text(T v) {
  constexpr int bits = std::numeric_limits<T>::digits;  // value bits: 64 for uint64, 63 for int64
  if (v == std::numeric_limits<T>::max()) return datamask::detail::concat("2^", bits, " - 1");
  if (std::is_signed_v<T> && v == std::numeric_limits<T>::min()) return datamask::detail::concat("-2^", bits);
  return datamask::detail::concat(v);
}

/// What a numeric or on/off setting takes, as its messages say: an integer setting's range (a
/// Python int outside it does not convert, or fails the setting's check).
template <class Entry>
std::string expected_value(const Entry& s) {
  using T = typename Entry::value_type;
  if constexpr (std::is_same_v<T, bool>) {
    return "a bool";
  } else if constexpr (std::is_integral_v<T>) {
    return datamask::detail::concat("an integer in ", s.min_open ? "(" : "[", bound_text(s.min), ", ", bound_text(s.max),
                                    s.max_open ? ")" : "]");
  } else {
    return "a number";
  }
}

/// Applies the keywords given (already checked against the table's names by the Python layer),
/// noting each in `q.given`. Every message names the Python keyword.
void apply_options(dmfront::run_request& q, const nb::dict& given) {
  dmfront::visit_options([&](const auto& s) {
    using entry = std::remove_cvref_t<decltype(s)>;
    const std::string k = keyword(s.name);
    if (!given.contains(k.c_str())) return;
    q.given.emplace(s.name);
    nb::handle v = given[k.c_str()];
    auto& field = datamask::settings_of<entry>(q.settings).*s.member;
    using F = std::remove_cvref_t<decltype(field)>;
    const auto found = [&] { return nb::cast<std::string>(nb::repr(v)); };
    if constexpr (entry::kind == datamask::setting_kind::choice) {
      // A choice is a spelling: the message lists the spellings.
      using E = typename entry::value_type;
      DATAMASK_EXPECTS(nb::isinstance<nb::str>(v), k, "expected ", datamask::enum_names_text<E>(), ", found ", found());
      field = datamask::parse_enum<E>(nb::cast<std::string>(v), k);
    } else {
      using T = typename entry::value_type;
      // Python's bool is an int: True is no value of a numeric setting.
      constexpr bool flag = std::is_same_v<T, bool>;
      DATAMASK_EXPECTS(flag || !PyBool_Check(v.ptr()), k, "expected ", expected_value(s), ", found ",
                       found());
      try {
        if constexpr (std::is_same_v<F, std::optional<T>>) {
          field = nb::cast<T>(v);
        } else {
          field = nb::cast<F>(v);  // the value, or a list of values (scales)
        }
      } catch (const nb::cast_error&) {
        // The value did not convert: a wrong type, or an integer outside the field's type.
        throw invalid_input(k, datamask::detail::concat("expected ", expected_value(s), ", found ", found()));
      }
    }
  });
}

// --- a call's Python side: its errors, its metric, its progress and interruption -----------------

/// datamask.Cancelled: the caller's cancel event was set.
struct cancelled : std::runtime_error {
  cancelled() : std::runtime_error("the selection was cancelled (its cancel event was set)") {}
};

/// What the library calls back into Python during one call, from whichever thread it runs on:
/// the metric (datamask.Metric, its results checked by the Python layer), the progress callable
/// and the cancel event. Each callback takes the GIL for its own time (a batch of subsets, one
/// relaxation, one event, one poll at most every 50 ms); the metric's may come from a second
/// thread meanwhile (the continuous learner's stochastic start beside its ascent, under CUDA),
/// so the checks made without the GIL read an atomic flag. The first Python error (the metric's
/// exception or the InvalidInput of a wrong result, the callable's exception, KeyboardInterrupt:
/// seen only when the main thread runs the call) is kept: the metric's values are NaN from then
/// on, the run stops at its next poll, and the call raises it once the library returns. Lives in
/// the call's frame (shared with the metric's functions): its objects are released with the GIL held.
class python_side {
 public:
  python_side(nb::object on_event, nb::object cancel) : on_event_(std::move(on_event)), cancel_(std::move(cancel)) {}

  /// The library's objective of `spec` = (name, score, relax or None), as
  /// datamask/__init__.py passes it, calling back through `side`, which holds its functions (a
  /// call's metrics each their own).
  static datamask::external_objective metric(const nb::tuple& spec, const std::shared_ptr<python_side>& side) {
    const std::size_t k = side->metrics_.size();
    side->metrics_.push_back({spec[1], spec[2]});
    datamask::external_objective o;
    o.label = nb::cast<std::string>(spec[0]);
    const auto nan = std::numeric_limits<double>::quiet_NaN();
    o.score = [side, k, nan](const datamask::batch_view<float>& b, std::span<double> out) {
      nb::gil_scoped_acquire gil;
      const bool ran = side->guarded([&] {
        const auto v = nb::cast<nb::ndarray<const double, nb::ndim<1>, nb::c_contig>>(
            side->metrics_[k].score(view(b.embeddings), view(b.subsets)));
        std::copy(v.data(), v.data() + out.size(), out.begin());
      });
      if (!ran) std::fill(out.begin(), out.end(), nan);
    };
    if (side->metrics_[k].relax.is_none()) return o;
    o.relaxation = [side, k, nan](const datamask::relax_view<float>& v, std::span<double> grad) {
      nb::gil_scoped_acquire gil;
      double value = nan;
      const std::size_t n = v.p.size();
      const bool ran = side->guarded([&] {
        nb::ndarray<nb::numpy, const double, nb::ndim<1>> pa(v.p.data(), {n}, nb::handle());
        const auto r = nb::cast<nb::tuple>(side->metrics_[k].relax(view(v.embeddings), pa, v.total));
        value = nb::cast<double>(r[0]);
        const auto g = nb::cast<nb::ndarray<const double, nb::ndim<1>, nb::c_contig>>(r[1]);
        std::copy(g.data(), g.data() + n, grad.begin());
      });
      if (!ran) std::fill(grad.begin(), grad.end(), nan);
      return value;
    };
    return o;
  }

  /// The events' total over the run and what they count ("step", "iteration", "pick" or "unit").
  void plan(index_t total, const char* unit) {
    total_ = total;
    unit_ = unit;
  }
  /// Progress events (the optimizer's steps or picks, and the rows of a block's kNN graph while
  /// it is built) and the stop poll of block `block`.
  datamask::block_hooks hooks(index_t block, index_t blocks) {
    datamask::block_hooks h;
    const double none = std::numeric_limits<double>::quiet_NaN();
    h.on_step = [this, block, blocks](const datamask::step_record& rec) { step(block, blocks, rec.step, rec.reward_mean); };
    h.on_pick = [this, block, blocks, none](index_t picked) { step(block, blocks, picked, none); };
    h.on_graph_progress = [this, block, blocks, none](index_t rows, index_t of) {
      emit(block, blocks, rows, rows, of, none, "row");
    };
    h.stop = [this] { return poll(); };
    return h;
  }
  /// Whether the run is to stop now (checked before each block too: not every optimizer polls).
  bool stopping() {
    last_ = {};
    return poll();
  }
  /// Whether an error is kept (a metric's NaN may have met the library's checks first).
  [[nodiscard]] bool failed() const { return error_.has_value(); }
  /// Raises the Python error that stopped the run, if any, or datamask.Cancelled (the GIL held).
  void rethrow() {
    if (error_) {
      nb::python_error first = std::move(*error_);
      error_.reset();
      throw first;
    }
    if (cancelled_) throw cancelled();
  }

 private:
  /// `x` as a read-only numpy array (no copy; valid during the call only).
  template <class T>
  static nb::object view(datamask::matrix_view<const T> x) {
    const std::size_t shape[2] = {static_cast<std::size_t>(x.rows), static_cast<std::size_t>(x.cols)};
    const std::int64_t strides[2] = {x.stride, 1};
    return nb::cast(nb::ndarray<nb::numpy, const T, nb::ndim<2>>(x.data, 2, shape, nb::handle(), strides));
  }
  /// Runs `call` (the GIL held) unless an error came before, keeping its error. False: it did not complete.
  template <class F>
  bool guarded(F&& call) {
    if (error_) return false;
    try {
      call();
      return true;
    } catch (nb::python_error& e) {
      error_.emplace(std::move(e));
    } catch (const nb::cast_error&) {  // the Python layer returns float64 arrays: a broken contract
      PyErr_SetString(PyExc_TypeError, "datamask: a metric's checked result did not convert to float64");
      error_.emplace();
    }
    failed_.store(true);
    return false;
  }
  void step(index_t block, index_t blocks, index_t step, double value) {
    ++done_;
    emit(block, blocks, step, done_, total_, value, unit_);
  }
  void emit(index_t block, index_t blocks, index_t step, index_t done, index_t total, double value, const char* unit) {
    if (on_event_.is_none() || failed_.load()) return;
    nb::gil_scoped_acquire gil;
    guarded([&] { on_event_(block, blocks, step, done, total, value, unit); });
  }
  bool poll() {
    if (failed_.load() || cancelled_) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(50)) return false;
    last_ = now;
    nb::gil_scoped_acquire gil;
    guarded([&] {
      if (PyErr_CheckSignals() != 0) throw nb::python_error();  // the pending KeyboardInterrupt
      if (cancel_.is_none()) return;
      const int set = PyObject_IsTrue(cancel_.attr("is_set")().ptr());  // any truth value, as `if` reads it
      if (set < 0) throw nb::python_error();
      cancelled_ = set == 1;
    });
    return error_.has_value() || cancelled_;
  }

  nb::object on_event_, cancel_;  // None: not given
  struct metric_functions {
    nb::object score, relax;  // relax None: not given
  };
  std::vector<metric_functions> metrics_;  // one per metric of the call, in `metric`'s order
  std::optional<nb::python_error> error_;  // written and read with the GIL held
  std::atomic<bool> failed_{false};        // error_ holds one: read without the GIL
  bool cancelled_ = false;
  index_t total_ = 0;
  const char* unit_ = "step";
  index_t done_ = 0;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// --- results ---------------------------------------------------------------------------------------

/// A numpy array that owns `values`.
template <class T>
nb::object owned_array(std::vector<T> values) {
  auto* heap = new std::vector<T>(std::move(values));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(heap->data(), {heap->size()}, owner));
}

/// The selected ids in the type of the ids given: uint64 for unsigned ids, else int64.
nb::object id_array(std::vector<datamask::id_t> ids, bool is_unsigned) {
  if (is_unsigned) return owned_array(std::move(ids));
  return owned_array(std::vector<std::int64_t>(ids.begin(), ids.end()));
}

nb::list terms_list(const std::vector<datamask::term_value>& terms) {
  nb::list out;
  for (const auto& t : terms) {
    nb::dict d;
    d["name"] = t.name;
    d["raw"] = t.raw;
    d["scale"] = t.scale;
    d["weight"] = t.weight;
    d["constant"] = t.constant;
    out.append(d);
  }
  return out;
}

nb::list history_list(const std::vector<datamask::block_result>& blocks) {
  nb::list out;
  for (const auto& b : blocks) {
    for (const auto& h : b.history) {
      nb::dict d;
      d["block"] = b.block;
      d["step"] = h.step;
      d["lr"] = h.lr;
      d["reward_mean"] = h.reward_mean;
      d["reward_max"] = h.reward_max;
      d["term_means"] = nb::cast(h.term_means);
      out.append(d);
    }
  }
  return out;
}

/// Writes `datamask::io::visit_*_fields` into a dict, as the program's report writes them:
/// non-finite numbers as None.
struct dict_writer {
  nb::dict d;
  void value(const std::string& name, double v) { d[name.c_str()] = std::isfinite(v) ? nb::cast(v) : nb::none(); }
  void value(const std::string& name, bool v) { d[name.c_str()] = v; }
  void value(const std::string& name, const std::string& v) { d[name.c_str()] = v; }
  void value(const std::string& name, std::nullopt_t) { d[name.c_str()] = nb::none(); }
  template <std::integral T>
  void value(const std::string& name, T v) {
    d[name.c_str()] = v;
  }
  template <class F>
  void object(const std::string& name, F&& f) {
    dict_writer w;
    f(w);
    d[name.c_str()] = w.d;
  }
};

/// A certificate as the program's report writes it.
nb::dict certificate_dict(const datamask::block_certificate& c) {
  dict_writer w;
  datamask::io::visit_certificate_fields(c, w);
  return w.d;
}

/// A block as the program's report writes it.
nb::dict block_dict(const datamask::block_result& b) {
  dict_writer w;
  datamask::io::visit_block_fields(b, w);
  return w.d;
}

/// graph=(ids, sims): the caller's kNN graph of the corpus's n rows, checked and sorted as
/// datamask-select's --graph files are (`datamask::make_knn_graph`); null without one.
std::shared_ptr<const datamask::knn_graph> given_graph(const std::optional<graph_arrays>& g,
                                                       const std::vector<shard_arg>& shards) {
  if (!g) return nullptr;
  index_t n = 0;
  for (const shard_arg& a : shards) n += shard_rows(a);
  const auto shape = [](const auto& a) {
    std::vector<std::int64_t> out(a.ndim());
    for (std::size_t i = 0; i < a.ndim(); ++i) out[i] = static_cast<std::int64_t>(a.shape(i));
    return out;
  };
  const index_t k = datamask::check_knn_shapes("graph ids", shape(g->first), "graph sims", shape(g->second), n);
  const auto entries = static_cast<std::size_t>(n) * static_cast<std::size_t>(k);
  nb::gil_scoped_release nogil;  // O(n K log K): other Python threads (one setting `cancel`) run meanwhile
  return std::make_shared<const datamask::knn_graph>(datamask::make_knn_graph(
      {g->first.data(), entries}, {g->second.data(), entries}, n, k, "graph ids", "graph sims",
      "given as arrays, K = " + std::to_string(k)));
}

/// datamask/__init__.py's corpus arguments: (shards, quality columns, their weights, ids or None,
/// the shards' names in messages: empty for `embeddings[i]`).
using corpus_args = std::tuple<std::vector<shard_arg>, std::vector<column_array>, std::vector<double>,
                               std::optional<ids_array>, std::vector<std::string>>;
/// Its request arguments: (options, objectives (each a built-in's name or a metric's (name,
/// score, relax or None)), their weights, optimizer, neighbors, graph or None).
using request_args = std::tuple<nb::dict, nb::list, std::vector<double>, std::string, index_t,
                                std::optional<graph_arrays>>;

/// A call's request (the keywords given applied to the library's defaults, checked together by
/// dmfront::resolve as datamask-select's are) and its corpus (`ids_name`: the ids' argument).
struct call {
  dmfront::run_request request;
  corpus k;
  double graph_seconds = 0.0;  ///< checking and sorting the graph given
};

/// The call of these arguments; a metric (`python_side::metric`) calls back through `side`.
/// `certify`: a certificate is asked for (its budget's options are refused without one).
call make_call(const corpus_args& corpus_in, const request_args& request_in, const std::string& ids_name,
               const std::shared_ptr<python_side>& side, bool certify = false, const worker_share& share = {},
               index_t block_size = 2) {
  const auto& [shards, quality, quality_weights, ids, names] = corpus_in;
  const auto& [options, objectives, objective_weights, optimizer, neighbors, graph] = request_in;
  call c;
  const auto t_graph = std::chrono::steady_clock::now();
  c.request.settings.graph = given_graph(graph, shards);
  c.graph_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_graph).count();
  datamask::block_run_settings& r = c.request.settings;
  apply_options(c.request, options);
  static const dmfront::objective_registry builtins;  // Python's own objectives come as metrics
  std::vector<dmfront::objective_spec> entries;
  for (const nb::handle e : objectives) {  // a metric is a term of f of its own
    if (nb::isinstance<nb::str>(e)) {
      entries.push_back({nb::cast<std::string>(e), nullptr});
    } else {
      entries.push_back({"", std::make_shared<const datamask::external_objective>(
                                 python_side::metric(nb::cast<nb::tuple>(e), side))});
    }
  }
  builtins.apply(entries, objective_weights, r);
  r.neighbors = neighbors;
  r.certify = certify;
  r.optimizer = datamask::parse_enum<datamask::block_optimizer>(optimizer, "optimizer");
  c.request.quality = !quality.empty();
  const dmfront::resolution res = dmfront::resolve(c.request, python_spelling());
  if (!res.threads_capped.empty() &&
      PyErr_WarnEx(PyExc_UserWarning, ("threads: " + res.threads_capped).c_str(), 1) != 0) {
    throw nb::python_error();  // warnings turned into errors
  }
  c.k = make_corpus(shards, quality, quality_weights, ids, ids_name, r.run.threads, share, block_size, names);
  return c;
}

/// datamask.select's result (datamask/__init__.py makes the Selection): the ids in block order,
/// f over the blocks, each block as the report writes it, the optimizers that ran, the seconds
/// since `t0`.
nb::dict selection_dict(const std::vector<datamask::block_result>& results, const datamask::corpus_plan& plan,
                        bool ids_unsigned, const datamask::block_run_settings& r,
                        std::chrono::steady_clock::time_point t0) {
  index_t selected = 0;  // the blocks run here (a worker's, or all)
  for (const auto& b : results) selected += plan.counts[static_cast<std::size_t>(b.block)];
  dmfront::run_totals t =
      dmfront::totals_of(results, selected, datamask::enum_name(datamask::resolve_optimizer(r)));
  nb::list blocks;
  for (const auto& b : results) blocks.append(block_dict(b));
  nb::dict out;
  out["ids"] = id_array(std::move(t.ids), ids_unsigned);
  out["objective"] = t.objective;
  out["terms"] = terms_list(t.terms);
  out["history"] = history_list(results);
  out["blocks"] = blocks;
  out["optimizer"] = t.optimizers;
  out["prune_threshold"] = plan.prune_threshold;
  out["certificate"] = t.certificate ? nb::object(certificate_dict(*t.certificate)) : nb::none();
  nb::dict seconds;
  seconds["optimize"] = t.optimize_seconds;
  seconds["evaluate"] = t.evaluate_seconds;
  if (t.certificate) seconds["certify"] = t.certificate->seconds;
  seconds["total"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out["seconds"] = seconds;
  return out;
}

/// datamask.select's engine: the corpus plan, then every block through the library, as
/// datamask-select runs them.
/// A plan's values as Python passes them back: (prune threshold or None, the calibration's
/// terms as (name, weight, scale, raw, constant)).
using plan_args = std::tuple<std::optional<double>, std::vector<std::tuple<std::string, double, double, double, bool>>>;

/// The corpus-wide values of a run (`datamask.plan`): the prune threshold and f's calibration,
/// computed from every row as one process computes them.
nb::dict plan_corpus(const corpus_args& corpus_in, const request_args& request_in, index_t block_size) {
  const auto side = std::make_shared<python_side>(nb::none(), nb::none());
  worker_share everything;
  everything.check_values = false;
  call c = make_call(corpus_in, request_in, "ids", side, false, everything, block_size);
  DATAMASK_EXPECTS(block_size >= 2, "block_size", "must be at least 2, found ", block_size);
  datamask::block_run_settings& r = c.request.settings;
  datamask::corpus_plan plan;
  try {
    nb::gil_scoped_release nogil;
    (void)dmfront::use_block_device(std::nullopt);
    plan = c.k.plan(r.run, block_size, {0, 0});
    plan.prune_threshold = dmfront::prune_threshold(c.k, r.run.prune, {{0, c.k.n}, {}});
    dmfront::calibrate_corpus(c.k, plan, r, {{0, c.k.n}, {}});
  } catch (const invalid_input& e) {
    side->rethrow();
    throw dmfront::as_option(e, python_spelling());
  }
  side->rethrow();
  nb::dict out;
  out["prune_threshold"] = plan.prune_threshold;
  out["calibration"] = terms_list(r.calibration);
  return out;
}

nb::dict select_corpus(const corpus_args& corpus_in, const request_args& request_in, index_t block_size, bool certify,
                       nb::object on_event, nb::object cancel, std::tuple<index_t, index_t, index_t, index_t> worker,
                       std::optional<plan_args> given) {
  // Before the GIL is released: it holds references.
  const auto side = std::make_shared<python_side>(std::move(on_event), std::move(cancel));
  const auto [rank, world, first, last] = worker;
  const worker_share share{rank, world, {first, last}};
  DATAMASK_EXPECTS(block_size >= 2, "block_size", "must be at least 2, found ", block_size);
  call c = make_call(corpus_in, request_in, "ids", side, certify, share, block_size);
  datamask::block_run_settings& r = c.request.settings;
  const corpus& k = c.k;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<datamask::block_result> results;
  datamask::corpus_plan plan;
  try {
    nb::gil_scoped_release nogil;
    (void)dmfront::use_block_device(std::nullopt);  // under CUDA: a device is present, else a clear error
    const auto layout = k.layout(block_size);
    const auto mine = datamask::worker_blocks(layout.blocks(), rank, world);
    plan = k.plan(r.run, block_size, datamask::groups_of_blocks(layout, mine));
    if (r.graph) dmfront::check_given_graph(k.n, plan.blocks.size(), python_spelling());
    // The corpus-wide values: the plan's, or computed from every row (the call passed them all).
    const bool every_row = k.window == std::pair<index_t, index_t>{0, k.n};
    if (given) {
      plan.prune_threshold = std::get<0>(*given);
      for (const auto& [name, weight, scale, raw, constant] : std::get<1>(*given)) {
        r.calibration.push_back(datamask::term_value{name, weight, scale, raw, constant});
      }
    } else if (every_row) {
      plan.prune_threshold = dmfront::prune_threshold(k, r.run.prune, {{0, k.n}, {}});
      dmfront::calibrate_corpus(k, plan, r, {{0, k.n}, {}});  // f calibrated once for a corpus of several blocks
    } else {  // a worker's rows only: the run must need nothing of the whole corpus
      DATAMASK_EXPECTS(r.run.prune <= 0.0 && !datamask::calibrates_corpus(layout.blocks(), r), "plan",
                       "this worker was given its own rows only, but the run needs the corpus's prune threshold or "
                       "calibration: give plan=datamask.plan(...)");
    }
    const auto optimizers = dmfront::block_optimizers(r, plan, k.d);
    dmfront::refuse_unread_on_blocks(c.request, plan, optimizers, python_spelling());
    const std::vector<index_t>& all = mine;
    // Progress counts what each block's optimizer repeats (auto can give a block naive greedy).
    const dmfront::progress_plan p = dmfront::plan_progress(r, plan, optimizers, all);
    side->plan(p.total(), p.unit().empty() ? "unit" : p.unit().data());
    dmfront::block_side blocks;
    blocks.before = [&](index_t) {
      if (side->stopping()) throw datamask::run_stopped();
    };
    const auto nb_blocks = static_cast<index_t>(plan.blocks.size());
    blocks.hooks = [&](index_t b) { return side->hooks(b, nb_blocks); };
    if (r.graph) blocks.graph_seconds = c.graph_seconds;  // checked once, before the (one) block
    results = dmfront::run_blocks(k, plan, r, all, blocks);
  } catch (const datamask::run_stopped&) {
    results.clear();  // side->rethrow() says why
  } catch (const invalid_input& e) {
    side->rethrow();  // a metric's error comes first: the library may have met its NaN
    throw dmfront::as_option(e, python_spelling());
  }
  side->rethrow();  // KeyboardInterrupt or the callable's exception
  return selection_dict(results, plan, k.ids_unsigned, r, t0);
}

/// datamask.evaluate's engine: f and its terms on a subset of the corpus, as one block.
nb::dict evaluate_subset(const corpus_args& corpus_in, const request_args& request_in, const ids_array& subset) {
  const auto side = std::make_shared<python_side>(nb::none(), nb::none());
  const call c = make_call(corpus_in, request_in, "corpus_ids", side);
  const corpus& k = c.k;
  bool subset_unsigned = false;
  const std::span<const datamask::id_t> wanted = id_bits(subset, "ids", subset_unsigned);
  datamask::block_result res;
  {
    nb::gil_scoped_release nogil;
    (void)dmfront::use_block_device(std::nullopt);
    const std::vector<index_t> rows = k.rows_of_ids(wanted, subset_unsigned, "ids");
    try {
      res = dmfront::evaluate_subset(k, rows, c.request.settings, "ids");
    } catch (const invalid_input& e) {
      if (!side->failed()) throw dmfront::as_option(e, python_spelling());  // else the metric's error (the library met its NaN)
    }
  }
  side->rethrow();
  nb::dict out;
  out["objective"] = res.objective;
  out["terms"] = terms_list(res.terms);
  return out;
}

/// The corpus of datamask-select --demo (the library's synthetic generator with its defaults).
nb::tuple demo_corpus(std::uint64_t seed) {
  datamask::synthetic_options o;
  o.seed = seed;
  auto g = datamask::make_synthetic_corpus(o);
  auto* emb = new std::vector<float>(std::move(g.embeddings));
  auto* q = new std::vector<double>(std::move(g.quality));
  nb::capsule emb_owner(emb, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  nb::capsule q_owner(q, [](void* p) noexcept { delete static_cast<std::vector<double>*>(p); });
  return nb::make_tuple(
      nb::ndarray<nb::numpy, float, nb::ndim<2>>(emb->data(), {static_cast<std::size_t>(g.n), static_cast<std::size_t>(g.d)}, emb_owner),
      nb::ndarray<nb::numpy, double, nb::ndim<1>>(q->data(), {q->size()}, q_owner));
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "datamask's native core (see the datamask package for the documented API)";
  nb::exception<invalid_input>(m, "InvalidInput", PyExc_ValueError);
  nb::exception<cancelled>(m, "Cancelled", PyExc_Exception);
  m.attr("version") = datamask::version_string;
  m.attr("backend") = dmfront::block_backend_name();
  m.attr("default_block_size") = datamask::default_block_size;
  m.attr("low_knn_recall") = dmfront::low_knn_recall;
  m.def("settings_table", &settings_table, "The library's settings table, one dict per keyword.");
  m.def("select", &select_corpus, "corpus"_a.noconvert(), "request"_a, "block_size"_a, "certify"_a, "on_event"_a.none(),
        "cancel"_a.none(), "worker"_a = std::tuple<index_t, index_t, index_t, index_t>{0, 1, 0, -1},
        "plan"_a.none() = nb::none());
  m.def("plan", &plan_corpus, "corpus"_a.noconvert(), "request"_a, "block_size"_a);
  m.def(
      "worker_rows",
      [](const std::vector<index_t>& rows, index_t block_size, index_t rank, index_t world) {
        const auto [l, g] = worker_groups(rows, block_size, rank, world);
        return std::make_pair(l.group_row(g.first), l.group_row(g.second));
      },
      "shard_rows"_a, "block_size"_a, "rank"_a, "world"_a,
      "The rows [first, last) of the groups whose blocks worker `rank` of `world` runs (datamask-select's layout).");
  m.def("evaluate", &evaluate_subset, "corpus"_a.noconvert(), "request"_a, "ids"_a);
  m.def("demo_corpus", &demo_corpus, "seed"_a = 0, "The corpus of datamask-select --demo: (embeddings, quality).");
  m.def(
      "corpus_view_address",
      [](const std::vector<shard_array>& shards) {
        const corpus k = make_corpus(std::vector<shard_arg>(shards.begin(), shards.end()), {}, {}, std::nullopt, "ids", 1);
        // The one block of a one-block run, as run_blocks gathers it: the caller's buffer when it
        // is read where it lies, else a copy (then 0).
        std::vector<index_t> all(static_cast<std::size_t>(k.n));
        std::iota(all.begin(), all.end(), index_t{0});
        return k.with_block(all, true, 1, true, [&](const auto& p) {
          const auto* at = static_cast<const void*>(p.embeddings.data);
          bool in_shard = false;
          for (const auto& s : k.shards) in_shard = in_shard || at == static_cast<const void*>(s.data);
          return in_shard ? reinterpret_cast<std::uintptr_t>(at) : std::uintptr_t{0};
        });
      },
      "shards"_a.noconvert(),
      "Where the corpus view of a one-block selection reads the embeddings (0: none, each block is gathered); "
      "a test of zero-copy.");
  m.def(
      "buffer_address", [](const shard_array& a) { return reinterpret_cast<std::uintptr_t>(a.data()); }, "array"_a.noconvert(),
      "The address of the buffer the binding reads (a test of zero-copy).");
}
