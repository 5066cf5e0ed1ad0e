-- samples/tau_sweep.lua - how the locality band width tau trades expert
-- locality against load balance: ELDR at each tau beside the balancers,
-- on held-out rows (a seeded random half calibrates), over 3 arrival and
-- activation seeds with 95% confidence intervals.
--   eldr run samples/tau_sweep.lua [trace.h5 [workers [rate]]]
local path = arg[1] or "../shared/data/gptoss20b-routing.h5"
local K = tonumber(arg[2] or "4")
local rate = tonumber(arg[3] or "60")
local t = eldr.load(path)
local rows = eldr.experiments.tau_grid(t, {taus = {0, 0.02, 0.05, 0.1, 0.2, 0.5, 2}, workers = K,
                                          rate = rate, output_tokens = 128, seeds = 3})
print(string.format("%s: K = %d workers, Poisson %g req/s, 128 output tokens, seeds 1-3\n",
                    path, K, rate))
local function ci(v) return string.format("%+.2f..%+.2f", v[1], v[2]) end
eldr.report.print(rows, {"policy", "tau", {key = "tpot_p50_ms", title = "TPOT p50 ms", fmt = "%.3f"},
                         {key = "tpot_p99_ms", title = "p99 ms", fmt = "%.3f"},
                         {key = "distinct_per_step", title = "distinct/step"},
                         "imbalance", {key = "vs_best_pct", title = "vs best %", fmt = "%+.2f"},
                         {key = "vs_best_pct_ci95", title = "95% CI", fmt = ci}})
