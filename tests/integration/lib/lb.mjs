// The test load balancer: nginx, round-robin over the given 127.0.0.1 ports, no
// retry to the next upstream (a request that fails on one instance is the client's
// to retry), no buffering, and the chosen instance in an X-Upstream header. Files
// live in dir (made readable for nginx workers). Skipped by callers when nginx is
// missing (which('nginx') from redis.mjs). The caller stops the returned process by
// PID (stack.mjs stop, signal SIGQUIT).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { waitFor } from './redis.mjs';

export async function startNginx(bin, { dir, port, upstreams, readTimeoutS = 60, workerConnections = 256 }) {
  const conf = path.join(dir, 'nginx.conf');
  for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) fs.mkdirSync(path.join(dir, d), { recursive: true });
  fs.writeFileSync(conf, `daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/nginx-error.log warn;
events { worker_connections ${workerConnections}; }
http {
  access_log ${dir}/nginx-access.log;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream context_loader {
${upstreams.map((p) => `    server 127.0.0.1:${p};`).join('\n')}
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://context_loader;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_buffering off;
      proxy_next_upstream off;
      proxy_read_timeout ${readTimeoutS}s;
      add_header X-Upstream $upstream_addr always;
    }
  }
}
`);
  const proc = spawn(bin, ['-p', dir, '-c', conf, '-e', path.join(dir, 'nginx-error.log')], { stdio: 'ignore' });
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(1000) })).status > 0, 5000, 'nginx');
  return proc;
}
