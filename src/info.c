/* info: self-description (SPEC §15). Placeholder until the info helper lands. */
#include "server.h"

void info_handle(req_ctx *c)
{
    req_reply_error(c, 404, NULL, "no such route");
}
