-- verdict_words.lua - the verdict of eldr.advise and of eldr.sweep in
-- Lua, printed as the CLI prints it ("verdict: <head>: <reason>"), for
-- tests/e2e/verdict_same.sh, which compares the words with `eldr advise`
-- and the dashboard's view 7 on the same trace and settings.
-- usage: eldr run verdict_words.lua TRACE RATE SEEDS
local trace, rate, seeds = arg[1], tonumber(arg[2]), math.tointeger(tonumber(arg[3]))
assert(trace and rate and seeds, "usage: eldr run verdict_words.lua TRACE RATE SEEDS")
local t = eldr.load(trace)
local taus = {0, 0.05, 0.1, 0.2}
local a = eldr.advise(t, {workers = 4, tau = taus, rate = rate, seeds = seeds})
local v = a.verdict
print("advise: verdict: " .. v.head .. ": " .. v.reason)
print("advise: answer " .. v.answer .. ", why " .. v.why .. ", baselines " .. v.baselines
      .. ", m " .. v.comparisons)
local _, info = eldr.sweep(t, {workers = {4}, tau = taus, rate = {rate}, seeds = seeds})
assert(info.verdicts and #info.verdicts == 1, "eldr.sweep gives one verdict per K")
print("sweep: verdict: " .. info.verdicts[1].head .. ": " .. info.verdicts[1].reason)
