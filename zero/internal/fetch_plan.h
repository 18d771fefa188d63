// Stage 3's prefetch plan: the module order recorded in the first step,
// flattened into unit entries, walked by a window that only moves forward.
// It decides what to gather next and whether a released unit must stay; it
// owns no memory and issues no collective (the engine does both). Every call
// costs O(1) amortized, so a step is linear in the number of modules.
//
// The window runs from the entries of the next position to fetch to a
// cursor, and holds at most a budget of elements, gathered or not
// (DeepSpeed's numel_prefetching). A unit the cursor passes is claimed for
// that position: Release keeps it, as DeepSpeed's
// __most_recent_step_id_param_fetched_for does. Not thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace zero {

class FetchPlan {
 public:
  FetchPlan() = default;  // no plan yet: nothing is prefetched
  // `order`: modules in fetch order; `module_units`: each module's units;
  // `persistent`: units that stay gathered (left out of the plan);
  // `padded`: elements per unit.
  FetchPlan(std::vector<int> order, const std::vector<std::vector<int>>& module_units,
            const std::vector<bool>& persistent, std::vector<size_t> padded);

  bool empty() const { return order_.empty(); }
  const std::vector<int>& order() const { return order_; }

  // Each step starts at the front of the plan with no claims.
  void StartStep();
  // `fetched` positions are done: their entries leave the window.
  void Advance(size_t fetched);
  // The unit the window takes next if it fits within `budget` elements.
  std::optional<int> Next(size_t budget) const;
  // Takes that unit into the window and claims it for its position.
  void Take();
  // Whether `unit` is claimed for a position after `position` (never
  // without a plan).
  bool ClaimedAfter(int unit, int position) const {
    return !empty() && claimed_for_[unit] > position;
  }
  // Whether `module` comes again within `distance` positions from `next`;
  // `next` may only grow within a step.
  bool ReusedSoon(int module, size_t next, int distance);

 private:
  struct Entry {
    int unit;
    int position;
  };
  std::vector<int> order_;
  std::vector<size_t> padded_;
  std::vector<Entry> entries_;
  std::vector<size_t> begin_;  // first entry of each position; size order_ + 1
  size_t front_ = 0;           // first entry after the positions fetched
  size_t ahead_ = 0;           // next entry to decide on (>= front_)
  size_t window_ = 0;          // elements of the entries in [front_, ahead_)
  std::vector<int> claimed_for_;  // per unit; -1: not this step
  // Per module, its positions in order_ (CSR: uses_[use_begin_[m] ..
  // use_begin_[m + 1])) and, this step, the first that is not behind.
  std::vector<int> uses_;
  std::vector<int> use_begin_;
  std::vector<int> next_use_;
};

}  // namespace zero
