/* ptc: the PTC toolkit (SPEC §14). Placeholder until the PTC helper lands. */
#include "server.h"

void toolkit_handle(req_ctx *c)
{
    req_reply_error(c, 404, NULL, "no such route");
}
