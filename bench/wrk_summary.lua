-- wrk -s wrk_summary.lua: print one machine-readable line at the end of a run.
--
-- Only done() is defined, so wrk keeps its fast path during the run (no Lua
-- call per request or per response). The harness (bench/run.py) looks for the
-- line starting with "SLUICE-BENCH-JSON ".
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\nSLUICE-BENCH-JSON {"requests":%d,"duration_us":%d,"bytes":%d,'
    .. '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},'
    .. '"latency_us":{"mean":%.1f,"p50":%d,"p90":%d,"p99":%d,"max":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max))
end
