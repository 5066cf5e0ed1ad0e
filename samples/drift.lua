-- samples/drift.lua - drift: fit on one domain mix, evaluate on another,
-- refit on a recent window of the new mix. The two workloads come from
-- the generator with the same seed (the same domains and experts) and
-- different domain shares.
-- 120 req/s and 64 output tokens keep several requests in each batch, so
-- that routing shows in TPOT. The trace argument, if any, is ignored (the
-- workloads are generated).
--   eldr run samples/drift.lua [ignored [rate]]
local K = 4
local rate = tonumber(arg[2] or "120")
local common = {requests = 1200, layers = 16, experts = 64, top_k = 4, domains = 4, seed = 21,
                prompt_tokens = 64, decode_tokens = 32, arrival_rate = 40}
local function gen(shares)
  local o = {}
  for key, v in pairs(common) do o[key] = v end
  o.domain_shares = shares
  return eldr.gen(o)
end
local before = gen({6, 2, 1, 1})          -- mostly the first domain
local after = gen({1, 1, 2, 6})           -- the mix moved to the last one

local old_fit, old_eval = before:split{count = 600}
local model = eldr.fit(old_fit, {k = K})
local window, later = after:split{count = 600}  -- refit on a recent window
local refit = eldr.fit(window, {k = K})

local rows = {}
local function add(name, evname, m, eval)
  local r = eldr.calibrate.report(m, eval)
  local res = eldr.simulate(eval, {model = m, calib = window, policy = {"eldr", "jsq"},
                                   rate = rate, output_tokens = 64})
  rows[#rows + 1] = {model = name, eval = evname, mean_sim = r.mean_sim,
                     imbalance = r.imbalance, sizes = table.concat(r.sizes, " "),
                     tpot = res[1].tpot_p50_ms, jsq = res[2].tpot_p50_ms,
                     vs_jsq = res[1].vs_best_pct}
end
add("fit on old mix", "old mix", model, old_eval)
add("fit on old mix", "new mix", model, later)
add("refit on window", "new mix", refit, later)
print(string.format("domain shares 6:2:1:1 -> 1:1:2:6; K = %d, Poisson %g req/s, 64 output "
                    .. "tokens\n", K, rate))
eldr.report.print(rows, {"model", "eval", {key = "mean_sim", title = "mean cos"},
                         {key = "imbalance", title = "max/mean"}, "sizes",
                         {key = "tpot", title = "ELDR TPOT p50", fmt = "%.3f"},
                         {key = "jsq", title = "JSQ TPOT p50", fmt = "%.3f"},
                         {key = "vs_jsq", title = "vs JSQ %", fmt = "%+.2f"}})
