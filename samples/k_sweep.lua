-- samples/k_sweep.lua - the number of decode workers K: the balanced
-- K-means objective on the calibration rows, and ELDR against the
-- balancers in simulation, for each K.
--   eldr run samples/k_sweep.lua [trace.h5]
local path = arg[1] or "../shared/data/gptoss20b-routing.h5"
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
local rows = eldr.experiments.k_grid(t, {ks = {2, 4, 8}, rate = 8, output_tokens = 64})
eldr.report.print(rows, {"K", "policy", {key = "tpot_p50_ms", title = "TPOT p50 ms"},
                         {key = "distinct_per_step", title = "distinct/step"}, "imbalance",
                         {key = "vs_best_pct", title = "vs best %", fmt = "%+.2f"}})
