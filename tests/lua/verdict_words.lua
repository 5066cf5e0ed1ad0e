-- verdict_words.lua - the verdict of eldr.advise and of eldr.sweep in
-- Lua, printed as the CLI prints it ("verdict: <head>: <reason>"), for
-- tests/e2e/verdict_same.sh, which compares the words with `eldr advise`
-- / `eldr sweep` and the dashboard's view 7 on the same trace and settings.
-- usage: eldr run verdict_words.lua TRACE RATE SEEDS [MODEL]
-- With SEEDS 1 (no interval: eldr.advise refuses it) eldr.sweep's every
-- one-split path: the default split, the split pinned (split_seed 1: the
-- same rows), and with MODEL the model's recipe ("sweep-model: ...").
local trace, rate, seeds = arg[1], tonumber(arg[2]), math.tointeger(tonumber(arg[3]))
assert(trace and rate and seeds, "usage: eldr run verdict_words.lua TRACE RATE SEEDS [MODEL]")
local t = eldr.load(trace)
local taus = {0, 0.05, 0.1, 0.2}
local function sweep_line(tag, o)
  local _, info = eldr.sweep(t, o)
  assert(info.verdicts and #info.verdicts == 1, "eldr.sweep gives one verdict per K")
  local v = info.verdicts[1]
  print(tag .. ": verdict: " .. v.head .. ": " .. v.reason)
  print(tag .. ": answer " .. v.answer .. ", why " .. v.why)
end
if seeds > 1 then
  local a = eldr.advise(t, {workers = 4, tau = taus, rate = rate, seeds = seeds})
  local v = a.verdict
  print("advise: verdict: " .. v.head .. ": " .. v.reason)
  print("advise: answer " .. v.answer .. ", why " .. v.why .. ", baselines " .. v.baselines
        .. ", m " .. v.comparisons)
  sweep_line("sweep", {workers = {4}, tau = taus, rate = {rate}, seeds = seeds})
else
  sweep_line("sweep", {workers = {4}, tau = taus, rate = {rate}})
  sweep_line("sweep-pinned", {workers = {4}, tau = taus, rate = {rate}, split_seed = 1})
  if arg[4] then
    sweep_line("sweep-model", {workers = {4}, tau = taus, rate = {rate}, model = eldr.load_model(arg[4])})
  end
end
