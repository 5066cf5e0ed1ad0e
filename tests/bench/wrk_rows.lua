-- tests/bench/wrk_rows.lua - the rows every wrk script of the benchmarks
-- writes (loaded with dofile from $ROOT): a rate, latency p50 and p99,
-- and the failed requests (non-200 answers the script counted plus
-- wrk's socket errors), as TSV (what, size, seconds, rate) to $WRK_ROWS.

function wrk_sum(threads, name)
  local n = 0
  for _, t in ipairs(threads) do n = n + t:get(name) end
  return n
end

-- what: the row prefix ("eldrd route+finish"); count and unit: the rate's
-- numerator ("routes/s"); failures: the script's own count.
function wrk_write_rows(summary, latency, what, count, unit, failures)
  local e = summary.errors
  local bad = failures + e.connect + e.read + e.write + e.timeout
  local secs = summary.duration / 1e6
  local size = os.getenv("WRK_SIZE") or ""
  local out = assert(io.open(os.getenv("WRK_ROWS"), "w"))
  local row = what .. "%s\t%s\t%.3f\t"
  out:write(string.format(row .. "%.0f %s\n", " over HTTP (wrk)", size, secs, count / secs, unit))
  out:write(string.format(row .. "%.3f ms\n", " latency p50 (wrk)", size, secs,
                          latency:percentile(50) / 1000))
  out:write(string.format(row .. "%.3f ms\n", " latency p99 (wrk)", size, secs,
                          latency:percentile(99) / 1000))
  out:write(string.format(row .. "%d of %d\n", " failed requests (wrk)", size, secs, bad,
                          summary.requests))
  out:close()
end
