// Benchmarks run only to produce Google Benchmark's golden JSON (see regenerate.sh): plain
// timings, arguments, bytes and items per second, a user counter, threads and an error row.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <numeric>
#include <vector>

static void BM_sum(benchmark::State& state) {
  std::vector<std::uint64_t> data(static_cast<std::size_t>(state.range(0)), 3);
  for (auto _ : state) {
    benchmark::DoNotOptimize(std::accumulate(data.begin(), data.end(), std::uint64_t{0}));
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * sizeof(std::uint64_t));
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["elements"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_sum)->Arg(64)->Arg(512);

static void BM_increment(benchmark::State& state) {
  std::uint64_t x = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(++x);
  }
}
BENCHMARK(BM_increment)->Threads(2)->UseRealTime();

static void BM_failing(benchmark::State& state) {
  for (auto _ : state) {
    state.SkipWithError("no input file");
    break;
  }
}
BENCHMARK(BM_failing);

BENCHMARK_MAIN();
