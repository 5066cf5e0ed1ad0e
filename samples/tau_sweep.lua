-- samples/tau_sweep.lua - how the locality band width tau trades expert
-- locality against load balance: ELDR at each tau beside the balancers,
-- on held-out rows (the first rows calibrate).
--   eldr run samples/tau_sweep.lua [trace.h5 [workers [rate]]]
local path = arg[1] or "../shared/data/gptoss20b-routing.h5"
local K = tonumber(arg[3] or "4")
local rate = tonumber(arg[4] or "8")
local t = eldr.load(path)
local rows = eldr.experiments.tau_grid(t, {taus = {0, 0.02, 0.05, 0.1, 0.2, 0.5, 2}, workers = K,
                                          rate = rate, output_tokens = 64})
print(string.format("%s: K = %d workers, Poisson %.1f req/s, 64 output tokens\n", path, K, rate))
eldr.report.print(rows, {"policy", "tau", {key = "tpot_p50_ms", title = "TPOT p50 ms"},
                         {key = "tpot_p99_ms", title = "p99 ms"},
                         {key = "distinct_per_step", title = "distinct/step"},
                         "imbalance", {key = "vs_best_pct", title = "vs best %", fmt = "%+.2f"}})
