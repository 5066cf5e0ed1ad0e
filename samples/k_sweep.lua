-- samples/k_sweep.lua - the number of decode workers K: the balanced
-- K-means objective on the calibration rows, and ELDR against the
-- balancers in simulation, for each K (a seeded random half of the trace
-- calibrates; 3 arrival/activation seeds give 95% confidence intervals).
--   eldr run samples/k_sweep.lua [trace.h5 [rate]]
local path = arg[1] or "../shared/data/gptoss20b-routing.h5"
local rate = tonumber(arg[2] or "60")
local t = eldr.load(path)
local calib = eldr.calib_split(t)
local sigs = eldr.signatures(calib, {variant = "count_idf"})
local fit = {}
for _, K in ipairs({2, 4, 8}) do
  local km = eldr.kmeans(sigs, {k = K})
  local min, max = math.huge, 0
  for _, s in ipairs(km.sizes) do min, max = math.min(min, s), math.max(max, s) end
  fit[#fit + 1] = {K = K, objective = km.objective, per_row = km.objective / #sigs,
                   sizes = min .. ".." .. max, iterations = km.iterations}
end
print(path .. ": balanced K-means on " .. #calib .. " calibration rows\n")
eldr.report.print(fit, {"K", "objective", {key = "per_row", title = "per row"}, "sizes", "iterations"})
print()
local rows = eldr.experiments.k_grid(t, {ks = {2, 4, 8}, rate = rate, output_tokens = 128,
                                          seeds = 3})
print(string.format("Poisson %g req/s, 128 output tokens, seeds 1-3\n", rate))
local function ci(v) return string.format("%+.2f..%+.2f", v[1], v[2]) end
eldr.report.print(rows, {"K", "policy", {key = "tpot_p50_ms", title = "TPOT p50 ms", fmt = "%.3f"},
                         {key = "distinct_per_step", title = "distinct/step"}, "imbalance",
                         {key = "vs_best_pct", title = "vs best %", fmt = "%+.2f"},
                         {key = "vs_best_pct_ci95", title = "95% CI", fmt = ci}})
