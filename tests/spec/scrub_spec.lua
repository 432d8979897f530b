-- host.scrub: an upstream's error text cut to an excerpt fit for a caller. Stack
-- frames go token by token, inline with other text as well as on their own lines.
local helper = require "helper"

describe("host.scrub", function()
    local scrub = helper.sandbox().require("host").scrub

    local function leaks(text, words)
        for _, w in ipairs(words) do
            assert.is_nil(text:find(w, 1, true), ("%q leaked in %q"):format(w, text))
        end
    end

    it("drops a Java stack frame written inline with other text", function()
        local s = scrub("Error: pool exhausted at com.corp.vega.Pool.take(Pool.java:88) while serving the request")
        assert.are.equal("Error: pool exhausted while serving the request", s)
        s = scrub("failed at java.lang.Thread.run(Native Method) at a.B.c(B.java:3) - retry later")
        assert.are.equal("failed - retry later", s)
    end)

    it("drops frames of other runtimes inline too", function()
        local s = scrub("TypeError: x is undefined at Object.<anonymous> (/app/server.js:10:5) at next (x.js:3:1) end")
        leaks(s, { "server.js", "Object.<anonymous>", "x.js", "/app" })
        assert.truthy(s:find("TypeError: x is undefined", 1, true))
        assert.truthy(s:find("end$"))
        s = scrub('boom Traceback (most recent call last): File "/srv/app/h.py", line 12, in handle KeyError: id')
        assert.are.equal("boom KeyError: id", s)
        s = scrub("panic: nil map goroutine 7 [running]: main.handler(0xc000012345) main.go:42 +0x1d done")
        assert.are.equal("panic: nil map done", s)
        s = scrub("Fatal error: oops in /var/www/app/index.php on line 12 #0 /var/www/x.php(3): App->run() {main}")
        leaks(s, { "index.php", "x.php", "line 12", "App->run" })
        assert.truthy(s:find("Fatal error: oops", 1, true))
    end)

    it("keeps the rest of the page: markup, prose, parentheses", function()
        local page = table.concat({ "<html><body><h1>Whitelabel Error Page</h1>",
            "<p>see http://10.0.3.7:13014/actuator/health</p><pre>",
            "java.lang.IllegalStateException: pool exhausted",
            "\tat com.corp.vega.Pool.take(Pool.java:88)",
            "\t... 12 more", "Caused by: java.io.IOException: reset", "</pre>",
            "<p>Service Unavailable (try again later)</p></body></html>" }, "\n")
        local s = scrub(page)
        leaks(s, { "http", "10.0.3.7", "Pool.java", "at com.", "12 more", "Caused by" })
        assert.truthy(s:find("Whitelabel Error Page", 1, true))
        assert.truthy(s:find("Service Unavailable (try again later)", 1, true))
        assert.truthy(#s <= 203)
    end)
end)
