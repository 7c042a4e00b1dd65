// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The Thrust backend: the learner's primitives as Thrust algorithms, on a GPU under nvcc
/// (THRUST_DEVICE_SYSTEM_CUDA, the default there) or on CPU threads under g++ with
/// `-DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP` (CMake target `datamask::thrust_omp`).
///
/// Not part of the umbrella header: include it yourself, and build with the Thrust/CCCL that
/// ships with the CUDA toolkit (`datamask::thrust_omp` or `datamask::cuda`).
///
/// What stays on the device for the whole run: the embeddings (copied once under CUDA; under a
/// host device system such as OMP the caller's memory is used in place), norms, ids, logits,
/// active batches, Gumbel keys, the G x k rollouts and objectives' resident arrays (a kNN graph,
/// copied on the first evaluation under CUDA, read in place under OMP). What comes back per
/// step: the G values of each term (and, for the Plackett-Luce update, G partial sums).
///
/// Same results as `eigen_backend`:
/// - masks: the same Philox draws (`rng::uniform01`, `rng::gumbel`, in double) and the same tie
///   rule (larger key, then smaller id), so with equal logits the rollouts are identical;
/// - the relaxed update sums each row's coefficients in increasing rollout order, the quality
///   term sums in draw order, the Plackett-Luce update follows the CPU's order of operations:
///   under OMP these are bit-identical to the CPU backend; under CUDA `exp`/`log` are CUDA's
///   (within 1 ulp of glibc's) and nvcc may contract a*b+c into an FMA, so values agree to
///   rounding and masks agree unless two keys fall within an ulp of each other;
/// - objectives: PWS and DiSF moments use the CPU's summation order in double; the dot products
///   of facility location and the correlations of DiSF are accumulated in double here but in the
///   embedding type (float) by Eigen on the CPU, so those two agree to about 1e-6 relative.
///
/// Diversity objectives are chosen by capability, never by type: an objective modelling
/// `device_evaluable` (the built-in ones, or a user's) runs on the device through this
/// backend's executor; a user functor modelling `device_objective` runs on the device, one
/// thread per rollout, through the same path; any other objective is scored on the host from
/// copies of the subset rows (slow under CUDA: it moves G x k indices per step and needs the
/// embeddings the dataset was made from to stay alive on the host, which the learner
/// guarantees). This header includes no objective.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include <thrust/binary_search.h>
#include <thrust/copy.h>
#include <thrust/device_free.h>
#include <thrust/device_malloc.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/gather.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/permutation_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include "datamask/exec/backend/concept.hpp"
#include "datamask/exec/backend/detail/thrust_functors.hpp"
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
#include "datamask/exec/backend/detail/cuda_dense.hpp"
#endif
#include "datamask/core/concepts.hpp"
#include "datamask/core/detail/parallel.hpp"
#include "datamask/core/device_objective.hpp"
#include "datamask/exec/dense.hpp"
#include "datamask/exec/reduce.hpp"
#include "datamask/core/philox.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief True when Thrust's device system is the GPU (device memory is not host memory).
inline constexpr bool thrust_device_is_cuda =
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
    true;
#else
    false;
#endif

/// @brief The Thrust backend (see the file comment). Stateless: copies are free.
struct thrust_backend {
  template <class T>
  using vector = thrust::device_vector<T>;
  static constexpr std::string_view name = thrust_device_is_cuda ? "thrust-cuda" : "thrust-omp";
  /// The passes run on the GPU under CUDA, leaving the host's cores free (`backend_frees_host`).
  static constexpr bool frees_host = thrust_device_is_cuda;

  /// @brief Device copies of host arrays an objective holds for a whole run (the executor's
  /// `resident`, see `device_evaluable`): each array is copied on its first request and the
  /// same copy is returned for later requests with the same address, size and type. The copies
  /// keep their owner alive, so no other array can take their address while they exist; the
  /// copies of an owner nobody else holds any more are dropped on the next request.
  /// Thread-safe.
  class resident_store {
   public:
    template <class U>
    const U* get(std::span<const U> host, std::shared_ptr<const void> owner) {
      const std::lock_guard<std::mutex> lock(mutex_);
      std::erase_if(owners_, [](const held& h) { return h.owner.use_count() == 1; });
      const std::type_index type(typeid(U));
      for (const held& h : owners_) {
        for (const copy& c : h.copies) {
          if (c.host == host.data() && c.count == host.size() && c.type == type) return static_cast<const U*>(c.device);
        }
      }
      auto values = std::make_shared<vector<U>>(host.begin(), host.end());
      const U* device = raw(*values);
      auto h = std::find_if(owners_.begin(), owners_.end(),
                            [&](const held& x) { return !x.owner.owner_before(owner) && !owner.owner_before(x.owner); });
      if (h == owners_.end()) h = owners_.insert(owners_.end(), held{std::move(owner), {}});
      h->copies.push_back(copy{host.data(), host.size(), type, std::move(values), device});
      return device;
    }
    /// @brief How many copies are held.
    [[nodiscard]] std::size_t size() const {
      const std::lock_guard<std::mutex> lock(mutex_);
      std::size_t count = 0;
      for (const held& h : owners_) count += h.copies.size();
      return count;
    }

   private:
    struct copy {
      const void* host;
      std::size_t count;
      std::type_index type;
      std::shared_ptr<void> values;  // the vector<U>
      const void* device;
    };
    struct held {
      std::shared_ptr<const void> owner;  // one reference per owner, so use_count 1 means unused
      std::vector<copy> copies;
    };
    mutable std::mutex mutex_;
    std::vector<held> owners_;
  };

  /// @brief Device buffers reused by the executors of a run: an executor's scratch comes back
  /// here when the executor (an iteration's scope) ends, so a run allocates device memory in its
  /// first iterations only. Why: under CUDA each cudaMalloc/cudaFree costs more than a pass over a
  /// small block, and cudaFree waits for the device. Buffers come in size classes (multiples of
  /// 256 bytes, and above 2 KiB the next m 2^k with 8 <= m < 16, so at most 1/8 unused) and are
  /// not initialised; the pool keeps each class's peak count until the run's dataset goes. A
  /// buffer returned while passes that use it are queued is safe: every pass runs on the one
  /// default stream, so the next user's passes come after them. Thread-safe.
  class scratch_pool {
   public:
    scratch_pool() = default;
    scratch_pool(const scratch_pool&) = delete;
    scratch_pool& operator=(const scratch_pool&) = delete;
    ~scratch_pool() {
      for (auto& [bytes, p] : free_) thrust::device_free(p);
    }
    /// @brief At least `bytes` bytes of device memory; they return to `pool` when the last copy
    /// of the handle goes.
    [[nodiscard]] static std::shared_ptr<void> take(const std::shared_ptr<scratch_pool>& pool, std::size_t bytes) {
      const std::size_t size = size_class(bytes);
      thrust::device_ptr<unsigned char> p;
      {
        const std::lock_guard<std::mutex> lock(pool->mutex_);
        if (auto it = pool->free_.find(size); it != pool->free_.end()) {
          p = it->second;
          pool->free_.erase(it);
        }
      }
      if (p.get() == nullptr) p = thrust::device_malloc<unsigned char>(size);
      return {static_cast<void*>(p.get()), [pool, size](void* q) {
                const std::lock_guard<std::mutex> lock(pool->mutex_);
                pool->free_.emplace(size, thrust::device_pointer_cast(static_cast<unsigned char*>(q)));
              }};
    }

   private:
    static std::size_t size_class(std::size_t bytes) {
      std::size_t size = 256;
      while (size < bytes) size += std::max<std::size_t>(256, std::bit_floor(size) / 8);
      return size;
    }
    std::mutex mutex_;
    std::multimap<std::size_t, thrust::device_ptr<unsigned char>> free_;
  };

  /// @brief The block on the device. Under CUDA the embeddings are copied (packed to dense
  /// rows); under a host device system they are read where the caller keeps them.
  template <class T>
  struct dataset {
    vector<T> storage;                    ///< the device copy; empty when none was needed
    matrix_view<const T> host_embeddings;  ///< the caller's matrix (host fallback only)
    vector<double> inv_norms;
    vector<double> sq_norms;
    vector<id_t> ids;
    std::vector<double> host_inv_norms;
    std::vector<double> host_sq_norms;
    /// Objectives' resident arrays (the kNN graph), copied once per dataset; copies of a
    /// dataset share them.
    std::shared_ptr<resident_store> resident = std::make_shared<resident_store>();
    /// The executors' scratch buffers, reused by every executor of a run on this block.
    std::shared_ptr<scratch_pool> pool = std::make_shared<scratch_pool>();

    /// @brief The embeddings as the device reads them.
    [[nodiscard]] matrix_view<const T> embeddings() const {
      if (storage.empty()) return host_embeddings;
      return {thrust::raw_pointer_cast(storage.data()), host_embeddings.rows,
              host_embeddings.cols};
    }
  };

  template <class T>
  [[nodiscard]] vector<T> to_device(std::span<const T> host) const {
    return vector<T>(host.begin(), host.end());
  }
  template <class T>
  [[nodiscard]] std::vector<T> to_host(const vector<T>& dev) const {
    std::vector<T> out(dev.size());
    thrust::copy(dev.begin(), dev.end(), out.begin());
    return out;
  }

  template <class T>
  [[nodiscard]] dataset<T> make_dataset(matrix_view<const T> x, std::span<const double> inv_norms,
                                        std::span<const double> sq_norms,
                                        std::span<const id_t> ids) const {
    dataset<T> ds;
    ds.host_embeddings = x;
    if constexpr (thrust_device_is_cuda) {
      if (x.stride == x.cols) {
        ds.storage.assign(x.data, x.data + x.rows * x.cols);
      } else {
        std::vector<T> packed(static_cast<std::size_t>(x.rows * x.cols));
        for (index_t i = 0; i < x.rows; ++i) std::copy(x.row(i), x.row(i) + x.cols, packed.data() + i * x.cols);
        ds.storage.assign(packed.begin(), packed.end());
      }
    }
    ds.inv_norms = to_device(inv_norms);
    ds.sq_norms = to_device(sq_norms);
    ds.ids = to_device(ids);
    ds.host_inv_norms.assign(inv_norms.begin(), inv_norms.end());
    ds.host_sq_norms.assign(sq_norms.begin(), sq_norms.end());
    return ds;
  }

  /// @brief The m candidates with the smallest uniform draw for (step, active-batch stream),
  /// ties to the smaller id, in increasing row order. Only candidates below a threshold a few
  /// standard deviations above m / c are sorted (all of them if too few pass it), so the result
  /// is exact either way.
  template <class T>
  void active_batch(const dataset<T>& ds, const vector<index_t>& candidates, rng::philox_key key,
                    std::uint32_t step, index_t m, vector<index_t>& out) const {
    namespace ti = detail::thrust_impl;
    const auto c = static_cast<index_t>(candidates.size());
    if (m >= c) {
      out = candidates;
      return;
    }
    vector<double> u(static_cast<std::size_t>(c));
    thrust::transform(thrust::device, candidates.begin(), candidates.end(), u.begin(),
                      ti::uniform_of_row{raw(ds.ids), key, step, rng::stream_active_batch});
    const double threshold = (static_cast<double>(m) + 8.0 * std::sqrt(static_cast<double>(m)) + 16.0) /
                             static_cast<double>(c);
    vector<double> su;
    vector<index_t> rows;
    index_t kept = c;
    if (threshold < 1.0) {
      su.resize(static_cast<std::size_t>(c));
      rows.resize(static_cast<std::size_t>(c));
      auto first = thrust::make_zip_iterator(u.begin(), candidates.begin());
      auto last = thrust::copy_if(thrust::device, first, first + c, u.begin(),
                                  thrust::make_zip_iterator(su.begin(), rows.begin()),
                                  ti::not_above{threshold});
      kept = static_cast<index_t>(last - thrust::make_zip_iterator(su.begin(), rows.begin()));
    }
    if (kept < m || threshold >= 1.0) {
      su = std::move(u);
      rows = candidates;
      kept = c;
    }
    su.resize(static_cast<std::size_t>(kept));
    rows.resize(static_cast<std::size_t>(kept));
    vector<id_t> sid(static_cast<std::size_t>(kept));
    thrust::transform(thrust::device, rows.begin(), rows.end(), sid.begin(), ti::id_of_row{raw(ds.ids)});
    auto keys = thrust::make_zip_iterator(su.begin(), sid.begin());
    thrust::sort_by_key(thrust::device, keys, keys + kept, rows.begin());
    out.assign(rows.begin(), rows.begin() + m);
    thrust::sort(thrust::device, out.begin(), out.end());
  }

  /// @brief G rollouts of k items from softmax(logits) over `active` by Gumbel-top-k; rollout g
  /// uses stream `first_stream + g`; `out` is G x k rows, each in draw order (largest key first,
  /// ties to the smaller id).
  ///
  /// One segmented sort of the G x m keys: the active rows are ordered by id, the keys are
  /// stably sorted descending over all rollouts, then stably by rollout, so within a rollout
  /// equal keys stay in id order.
  template <class T>
  void gumbel_top_k(const vector<double>& logits, const dataset<T>& ds,
                    const vector<index_t>& active, rng::philox_key key, std::uint32_t step,
                    std::uint32_t first_stream, index_t g_count, index_t k,
                    vector<index_t>& out) const {
    namespace ti = detail::thrust_impl;
    const auto m = static_cast<index_t>(active.size());
    const index_t total = g_count * m;
    vector<index_t> by_id(active);
    vector<id_t> ids(static_cast<std::size_t>(m));
    thrust::transform(thrust::device, by_id.begin(), by_id.end(), ids.begin(), ti::id_of_row{raw(ds.ids)});
    thrust::sort_by_key(thrust::device, ids.begin(), ids.end(), by_id.begin());

    vector<std::uint64_t> bits(static_cast<std::size_t>(total));
    vector<index_t> entries(static_cast<std::size_t>(total));
    thrust::sequence(thrust::device, entries.begin(), entries.end());
    thrust::for_each(thrust::device, count(0), count(total),
                     ti::gumbel_key{raw(logits), raw(by_id), raw(ds.ids), key, step, first_stream,
                                    m, raw(bits)});
    thrust::stable_sort_by_key(thrust::device, bits.begin(), bits.end(), entries.begin());
    vector<std::uint32_t> rollout(static_cast<std::size_t>(total));
    thrust::transform(thrust::device, entries.begin(), entries.end(), rollout.begin(),
                      ti::rollout_of_entry{m});
    thrust::stable_sort_by_key(thrust::device, rollout.begin(), rollout.end(), entries.begin());
    out.resize(static_cast<std::size_t>(g_count * k));
    thrust::for_each(thrust::device, count(0), count(g_count * k),
                     ti::take_top{raw(entries), raw(by_id), m, k, raw(out)});
  }

  /// @brief The executor (executor/concept.hpp) on Thrust's device system: `for_each` as a
  /// Thrust algorithm, scratch buffers that live until the executor goes out of scope, resident
  /// copies of host arrays kept in a `resident_store` (the dataset's, so a run copies its kNN
  /// graph once; an executor made without one keeps its own), the fixed-tree `reduce`, and the
  /// dense products as the generic device passes of executor/dense.hpp.
  class executor {
   public:
    executor() = default;
    executor(std::shared_ptr<resident_store> store, std::shared_ptr<scratch_pool> pool)
        : store_(std::move(store)), pool_(std::move(pool)) {}
    // Not copyable: two copies would share the reduce's partials (as the host executor, which
    // is not copyable either); a moved-from executor has no buffers left.
    executor(const executor&) = delete;
    executor& operator=(const executor&) = delete;
    executor(executor&& o) noexcept
        : store_(std::move(o.store_)), pool_(std::move(o.pool_)), buffers_(std::move(o.buffers_)),
          partials_(std::exchange(o.partials_, nullptr)), partials_count_(std::exchange(o.partials_count_, 0)) {}
    executor& operator=(executor&& o) noexcept {
      store_ = std::move(o.store_);
      pool_ = std::move(o.pool_);
      buffers_ = std::move(o.buffers_);
      partials_ = std::exchange(o.partials_, nullptr);
      partials_count_ = std::exchange(o.partials_count_, 0);
      return *this;
    }
    ~executor() = default;

    /// @brief Levels of a bisection decided per trip to the host (the projections'): under CUDA
    /// each `reduce` waits for the device and brings its value back, which costs more than the
    /// 2^4 - 1 sums of four levels in one pass (continuous/projection.hpp, benchmarks/GPU.md).
    static constexpr int search_depth = thrust_device_is_cuda ? 4 : 1;

    /// @brief An executor on the same device, resident store and pool, with buffers of its own.
    [[nodiscard]] executor scope() const { return executor(store_, pool_); }

    /// @brief f(i) for every i in [0, n) on the device (the work estimate is the host
    /// executor's; Thrust schedules by itself). Under CUDA the launch does not wait for the
    /// kernel: the passes queue on one stream, and a `download` (every `reduce`, `keep_if`)
    /// waits for what came before it.
    template <class F>
    void for_each(index_t n, F f, double /*work_per_item*/ = 0.0) {
      if (n <= 0) return;
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
      thrust::for_each(thrust::cuda::par_nosync, count(0), count(n), f);
#else
      thrust::for_each(thrust::device, count(0), count(n), f);
#endif
    }
    /// @brief `n` uninitialised values on the device, owned by the executor (from the pool, to
    /// which they return when the executor ends).
    template <class U>
    U* scratch(index_t n) {
      auto buffer = scratch_pool::take(pool_, static_cast<std::size_t>(n) * sizeof(U));
      U* p = static_cast<U*>(buffer.get());
      buffers_.push_back(std::move(buffer));
      return p;
    }
    /// @brief `host` in device memory (see the `executor` concept): a copy from the store under
    /// CUDA; under a host device system host memory is device memory, so `host` itself.
    template <class U>
    const U* resident(std::span<const U> host, const std::shared_ptr<const void>& owner) {
      if constexpr (thrust_device_is_cuda) {
        return store_->get(host, owner);
      } else {
        return host.data();
      }
    }
    /// @brief `host`'s values in a new buffer on the device, owned by the executor.
    template <class U>
    U* upload(std::span<const U> host) {
      U* p = scratch<U>(static_cast<index_t>(host.size()));
      thrust::copy(host.begin(), host.end(), thrust::device_pointer_cast(p));
      return p;
    }
    /// @brief Copies `host.size()` values at `from` back to the host.
    template <class U>
    void download(const U* from, std::span<U> host) {
      const auto first = thrust::device_pointer_cast(from);
      thrust::copy(first, first + static_cast<std::ptrdiff_t>(host.size()), host.begin());
    }
    /// @brief init op term(0) op ... op term(n - 1), the fixed tree of `tree_reduce` (at most
    /// `reduce_chunk` partials come back to the host); its scratch is kept between calls.
    template <class Term, class Op>
    double reduce(index_t n, Term term, Op op, double init) {
      const index_t need = tree_reduce_scratch(n);
      if (partials_count_ < need) {
        partials_ = scratch<double>(need);
        partials_count_ = need;
      }
      return tree_reduce(*this, partials_, n, term, op, init);
    }
    /// @brief The k in [0, n) with pred(k), ascending, into `out` (device memory); their count.
    template <class Pred>
    index_t keep_if(index_t n, Pred pred, index_t* out) {
      const auto last = thrust::copy_if(thrust::device, count(0), count(n), thrust::device_pointer_cast(out), pred);
      return static_cast<index_t>(last - thrust::device_pointer_cast(out));
    }
    template <class T>
    void column_sums(matrix_view<const T> x, const double* w, double* out) {
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
      dense::column_sums_with(*this, x, out, [&](executor& /*scope*/, index_t rows, index_t chunks, double* part) {
        detail::cuda_dense::column_chunks(x, w, rows, chunks, part);  // the same bits, more loads in flight
      });
#else
      dense::column_sums(*this, x, w, out);
#endif
    }
    template <class T>
    void row_dots(matrix_view<const T> x, const double* s, double* out) {
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
      detail::cuda_dense::row_dots(x, s, out);  // the same bits, read side by side
#else
      dense::row_dots(*this, x, s, out);
#endif
    }
    template <class T>
    void scatter(matrix_view<const T> x, const double* mu, const double* w, double* sigma) {
      dense::scatter(*this, x, mu, w, sigma);
    }
    template <class T>
    void quadratic_forms(matrix_view<const T> x, const double* mu, const double* g, double* out) {
      dense::quadratic_forms(*this, x, mu, g, out);
    }

   private:
    std::shared_ptr<resident_store> store_ = std::make_shared<resident_store>();
    std::shared_ptr<scratch_pool> pool_ = std::make_shared<scratch_pool>();
    std::vector<std::shared_ptr<void>> buffers_;  // this executor's scratch, back to the pool at its end
    double* partials_ = nullptr;                  // the reduce's scratch, one of buffers_
    index_t partials_count_ = 0;
  };

  /// @brief An executor for a run on `ds`: its resident copies are the dataset's.
  template <class T>
  [[nodiscard]] executor make_executor(const dataset<T>& ds) const {
    return executor(ds.resident, ds.pool);
  }

  /// @brief The dataset as a relaxation reads it: embeddings and norms in device memory; `p`
  /// and `total` are the caller's to fill.
  template <class T>
  [[nodiscard]] relax_view<T> relaxation_view(const dataset<T>& ds) const {
    return relax_view<T>{ds.embeddings(), raw(ds.inv_norms), raw(ds.sq_norms), {}, 0.0, 0};
  }

  /// @brief Scores G subsets of k rows: `device_evaluable` objectives and `device_objective`s on
  /// the device, anything else on the host (see the file comment).
  template <class T, class D>
  void evaluate(const D& objective, const dataset<T>& ds, const vector<index_t>& subsets,
                index_t g_count, index_t k, const vector<index_t>& reference,
                std::span<double> out) const {
    const auto nv = static_cast<index_t>(reference.size());
    if constexpr (device_evaluable<D, T> || device_objective<D, T>) {
      const batch_view<T> b{ds.embeddings(), raw(ds.inv_norms), raw(ds.sq_norms),
                            matrix_view<const index_t>(raw(subsets), g_count, k), index_view(raw(reference), nv)};
      vector<double> res(static_cast<std::size_t>(g_count));
      executor exec(ds.resident, ds.pool);
      if constexpr (device_evaluable<D, T>) {
        objective.evaluate_device(exec, b, raw(res));
      } else {
        evaluate_device_objective(objective, exec, b, raw(res));
      }
      thrust::copy(res.begin(), res.end(), out.begin());
    } else {
      // A host-only objective: copy the rows to the host and score them there.
      const std::vector<index_t> hs = to_host(subsets);
      const std::vector<index_t> hr = to_host(reference);
      const batch_view<T> b{ds.host_embeddings, ds.host_inv_norms.data(), ds.host_sq_norms.data(),
                            matrix_view<const index_t>(hs.data(), g_count, k), index_view(hr.data(), nv)};
      if constexpr (batched_diversity_objective<D, T>) {
        objective.evaluate_batch(b, out);
      } else {
        detail::parallel_for(g_count, 0, [&](index_t g) { out[g] = objective(b[g]); });
      }
    }
  }

  /// @brief Per-item credit's scores (`marginal_objective`), as `eigen_backend::marginals`: on
  /// the host, from copies of the subset and reference rows (G k + |V| indices per step), as a
  /// host-only objective is scored (the batched form where the objective has one); the
  /// marginals have no device form yet.
  template <class T, class D>
    requires marginal_objective<D, T>
  void marginals(const D& objective, const dataset<T>& ds, const vector<index_t>& subsets,
                 index_t g_count, index_t k, const vector<index_t>& reference,
                 std::span<double> values, std::span<double> out) const {
    const std::vector<index_t> hs = to_host(subsets);
    const std::vector<index_t> hr = to_host(reference);
    const batch_view<T> b{ds.host_embeddings, ds.host_inv_norms.data(), ds.host_sq_norms.data(),
                          matrix_view<const index_t>(hs.data(), g_count, k),
                          index_view(hr.data(), static_cast<index_t>(hr.size()))};
    if constexpr (batched_marginal_objective<D, T>) {
      objective.marginals_batch(b, values, out);
      return;
    }
    detail::parallel_for(g_count, 0, [&](index_t g) {
      values[g] = objective.marginals(b[g], out.subspan(static_cast<std::size_t>(g * k), static_cast<std::size_t>(k)));
    });
  }

  /// @brief out[g] = sum of `values` over the g-th subset, in draw order by chunks
  /// (core/detail/chunked_sum.hpp): a long subset (a read-out) spreads over many threads.
  void gather_sum(const vector<double>& values, const vector<index_t>& subsets, index_t g_count,
                  index_t k, std::span<double> out) const {
    const index_t nc = detail::subset_chunks(k);
    vector<double> part(static_cast<std::size_t>(g_count * nc));
    thrust::transform(thrust::device, count(0), count(g_count * nc), part.begin(),
                      detail::thrust_impl::gather_chunk{raw(values), raw(subsets), k, nc});
    if (nc > 1) {  // one chunk: its sum is the subset's
      vector<double> res(static_cast<std::size_t>(g_count));
      thrust::for_each(thrust::device, count(0), count(g_count), detail::chunk_totals{raw(part), nc, 1, raw(res)});
      part.swap(res);
    }
    thrust::copy(part.begin(), part.end(), out.begin());
  }

  /// @brief The G k rollout entries e = g k + t grouped by row: `rows` ascending, each row's
  /// entries ascending (the order the policy sums a row's terms in): one stable sort by row.
  struct grouped_entries {
    vector<index_t> rows;
    vector<index_t> entries;
  };
  [[nodiscard]] grouped_entries entries_by_row(const vector<index_t>& /*active*/,
                                               const vector<index_t>& subsets) const {
    grouped_entries out{subsets, vector<index_t>(subsets.size())};
    thrust::sequence(thrust::device, out.entries.begin(), out.entries.end());
    thrust::stable_sort_by_key(thrust::device, out.rows.begin(), out.rows.end(), out.entries.begin());
    return out;
  }

  /// @brief An executor on the device, for passes that need no dataset.
  [[nodiscard]] executor make_executor() const { return executor(); }

  /// @brief The values of a vector of this backend, as the executor's passes read them.
  template <class U>
  static U* data(vector<U>& v) {
    return raw(v);
  }
  template <class U>
  static const U* data(const vector<U>& v) {
    return raw(v);
  }

  /// @brief The S candidates with the largest logits, by logit descending, ties to the smaller id
  /// (`largest`), on the host.
  template <class T>
  [[nodiscard]] std::vector<index_t> top_rows(const vector<double>& logits, const dataset<T>& ds,
                                              const vector<index_t>& candidates,
                                              index_t s) const {
    return to_host(largest(raw(logits), ds, raw(candidates), static_cast<index_t>(candidates.size()), s));
  }

  /// @brief The S of `m` candidates (rows, in device memory) with the largest key, by key
  /// descending, ties to the smaller id, on the device. Two radix sorts of plain keys: by id, then
  /// stably by key (-0 and +0 as one key), so equal keys keep the smaller id first. Why not one
  /// sort by (key, id): a comparison sort reading both through the rows costs several times the
  /// radix sorts on a GPU, and a read-out sorts up to the whole block.
  template <class T>
  [[nodiscard]] vector<index_t> largest(const double* key, const dataset<T>& ds, const index_t* candidates,
                                        index_t m, index_t s) const {
    if (s <= 0 || m <= 0) return {};
    // The sorts' arrays from the run's scratch pool (no allocation per read-out).
    executor exec(ds.resident, ds.pool);
    const auto rows = thrust::device_pointer_cast(exec.scratch<index_t>(m));
    const auto ids = thrust::device_pointer_cast(exec.scratch<id_t>(m));
    const auto keys = thrust::device_pointer_cast(exec.scratch<double>(m));
    thrust::copy(thrust::device, thrust::device_pointer_cast(candidates), thrust::device_pointer_cast(candidates) + m,
                 rows);
    thrust::gather(thrust::device, rows, rows + m, ds.ids.begin(), ids);
    thrust::stable_sort_by_key(thrust::device, ids, ids + m, rows);
    thrust::transform(thrust::device, rows, rows + m, keys, detail::thrust_impl::key_of{key});
    thrust::stable_sort_by_key(thrust::device, keys, keys + m, rows, thrust::greater<double>());
    return vector<index_t>(rows, rows + std::min(s, m));
  }

 private:
  static thrust::counting_iterator<index_t> count(index_t i) {
    return thrust::counting_iterator<index_t>(i);
  }
  template <class U>
  static U* raw(vector<U>& v) {
    return thrust::raw_pointer_cast(v.data());
  }
  template <class U>
  static const U* raw(const vector<U>& v) {
    return thrust::raw_pointer_cast(v.data());
  }
};

static_assert(backend<thrust_backend>, "thrust_backend must model datamask::backend");

}  // namespace datamask
