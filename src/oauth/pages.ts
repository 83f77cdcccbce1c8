/**
 * The HTML of Vigil's sign-in, consent and error pages: small, server-rendered, no script, every
 * value escaped. The dashboard will share the sign-in page.
 */

const escape = (s: string) =>
  s.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string,
  );

function layout(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escape(title)} · Vigil</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; background: #f4f5f7; color: #1d2330; margin: 0; }
  main { max-width: 26rem; margin: 8vh auto; background: #fff; padding: 2rem; border-radius: 8px;
         box-shadow: 0 1px 3px rgba(0,0,0,.12); }
  h1 { font-size: 1.35rem; margin: 0 0 1rem; }
  label { display: block; margin: .9rem 0 .3rem; font-weight: 600; }
  input[type=email], input[type=password] { width: 100%; box-sizing: border-box; padding: .55rem;
         border: 1px solid #b8bfcc; border-radius: 4px; font: inherit; }
  button { font: inherit; padding: .55rem 1.1rem; border-radius: 4px; border: 1px solid #2456d3;
           background: #2456d3; color: #fff; cursor: pointer; margin: 1.2rem .5rem 0 0; }
  button.secondary { background: #fff; color: #2456d3; }
  .error { background: #fdecec; color: #8a1c1c; padding: .6rem .8rem; border-radius: 4px; }
  ul { padding-left: 1.2rem; }
  .muted { color: #5b6476; font-size: .9rem; }
</style>
</head>
<body><main>
${body}
</main></body>
</html>`;
}

const hidden = (fields: Record<string, string | null | undefined>) =>
  Object.entries(fields)
    .filter((e): e is [string, string] => typeof e[1] === "string")
    .map(([k, v]) => `<input type="hidden" name="${escape(k)}" value="${escape(v)}">`)
    .join("\n");

export function signInPage(p: {
  action: string;
  csrf: string;
  returnTo: string;
  email?: string;
  error?: string;
}) {
  return layout(
    "Sign in",
    `<h1>Sign in to Vigil</h1>
${p.error ? `<p class="error" role="alert">${escape(p.error)}</p>` : ""}
<form method="post" action="${escape(p.action)}">
${hidden({ _csrf: p.csrf, return_to: p.returnTo })}
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required value="${escape(p.email ?? "")}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>`,
  );
}

export function consentPage(p: {
  action: string;
  csrf: string;
  clientName: string | null;
  clientId: string;
  redirectUri: string;
  email: string;
  fields: Record<string, string | null>;
}) {
  const name = p.clientName ? `“${p.clientName}”` : "An application";
  return layout(
    "Allow access",
    `<h1>${escape(name)} wants to read your Vigil data</h1>
<p>Signed in as <strong>${escape(p.email)}</strong>.</p>
<p>If you allow it, it may <strong>read</strong>, never change:</p>
<ul>
<li>your connections and those of your organizations, with their health and uptime</li>
<li>their workflow executions and AI gateway usage and cost</li>
<li>anomalies and the history of alerts</li>
</ul>
<p class="muted">Client id ${escape(p.clientId)}; after you decide, you go back to ${escape(p.redirectUri)}.
You can withdraw access at any time.</p>
<form method="post" action="${escape(p.action)}">
${hidden({ _csrf: p.csrf, ...p.fields })}
<button type="submit" name="decision" value="approve">Allow</button>
<button type="submit" name="decision" value="deny" class="secondary">Deny</button>
</form>`,
  );
}

export function errorPage(message: string) {
  return layout(
    "Cannot continue",
    `<h1>Vigil cannot continue this sign-in</h1>
<p class="error" role="alert">${escape(message)}</p>
<p class="muted">Go back to the application and start again.</p>`,
  );
}
