-- samples/balanced_vs_unbalanced.lua - the ablation: balanced spherical
-- K-means (every cluster at most ceil(N/K) requests) against plain
-- spherical K-means, in cluster sizes, objective and routed TPOT.
--   eldr run samples/balanced_vs_unbalanced.lua [trace.h5 [K [rate]]]
-- The calibration rows are a seeded random half of the trace (the
-- default split); 60 req/s and 128 output tokens keep several requests
-- in each batch, so that where they go shows in TPOT.
local path = arg[1] or "../shared/data/gptoss20b-routing.h5"
local K = tonumber(arg[2] or "4")
local rate = tonumber(arg[3] or "60")
local t = eldr.load(path)
local calib, eval, split = eldr.calib_split(t)
local recipe = eldr.recipe(calib, {layers = "auto"})
local sigs = recipe:signatures(calib)
local _, _, k = t:geometry()
local rows = {}
for _, balanced in ipairs({true, false}) do
  local km = eldr.kmeans(sigs, {k = K, balanced = balanced})
  local model = eldr.model(recipe, km.centroids, {top_k = k})
  local res = eldr.simulate(eval, {model = model, calib = calib, policy = {"eldr", "jsq"},
                                   rate = rate, output_tokens = 128})
  local max = 0
  for _, s in ipairs(km.sizes) do max = math.max(max, s) end
  rows[#rows + 1] = {mode = balanced and "balanced" or "unbalanced",
                     sizes = table.concat(km.sizes, " "), max_over_mean = max / (#sigs / K),
                     objective = km.objective, tpot = res[1].tpot_p50_ms,
                     jsq = res[2].tpot_p50_ms, imbalance = res[1].imbalance,
                     vs_jsq = res[1].vs_best_pct}
end
print(string.format("%s: K = %d, Poisson %g req/s, 128 output tokens; %s\n", path, K, rate,
                    split.text))
eldr.report.print(rows, {"mode", "sizes", {key = "max_over_mean", title = "max/mean"}, "objective",
                         {key = "tpot", title = "ELDR TPOT p50 ms", fmt = "%.3f"},
                         {key = "jsq", title = "JSQ TPOT p50 ms", fmt = "%.3f"}, "imbalance",
                         {key = "vs_jsq", title = "vs JSQ %", fmt = "%+.2f"}})
