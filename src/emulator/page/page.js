// The emulator's page: plain DOM, no framework, no build step. It talks to the emulator's own
// /v2 API (the same the app's code uses) and to /_emulator/* for what only the emulator does.
// Everything received is untrusted text (response bodies come from the user's app), so the page
// builds DOM nodes and never assigns HTML strings.

const apiUrl = document.querySelector('meta[name="emulator-url"]').content;

// The token is never in the HTML: the link the emulator prints carries it in the fragment
// (#token=…), which the browser does not send. It is kept for this tab only (a reload keeps
// working) and taken out of the address bar, so it is not bookmarked or shared by a copied URL.
function takeToken() {
  const fromUrl = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromUrl) {
    sessionStorage.setItem("emulator-token", fromUrl);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("emulator-token") ?? "";
}
let token = takeToken();
let auth = { authorization: `Bearer ${token}` };

const state = {
  environments: [],
  eventTypes: [],
  projects: [],
  deliveries: new Map(),
  project: "default",
  retry: null,
};

const $ = (selector) => document.querySelector(selector);

/** Creates an element: h("td", { class: "x", onclick: fn }, "text", child). */
function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false || value === null) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "checked" || name === "value" || name === "open") element[name] = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Number.POSITIVE_INFINITY)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

async function call(method, url, body) {
  const response = await fetch(url, {
    method,
    headers: body === undefined ? auth : { ...auth, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const value = text ? JSON.parse(text) : undefined;
  if (response.status === 401) signIn("That token is not the emulator's: paste the one it printed.");
  if (!response.ok)
    throw new Error(value?.error ? `${value.error.code}: ${value.error.message}` : `HTTP ${response.status}`);
  return value;
}

const api = (method, path, body) =>
  call(method, `${apiUrl}/projects/${encodeURIComponent(state.project)}${path}`, body);

let toastTimer;
function toast(message, kind = "info") {
  const element = $("#toast");
  element.textContent = message;
  element.dataset.kind = kind;
  element.classList.add("shown");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => element.classList.remove("shown"), 4000);
}

async function attempt(action) {
  try {
    await action();
  } catch (error) {
    toast(error.message, "error");
  }
}

/** Re-renders a region and gives focus back to the control that had it (matched by its id). */
function keepFocus(render) {
  const id = document.activeElement?.id;
  render();
  if (id && document.activeElement?.id !== id) document.getElementById(id)?.focus();
}

const currentProject = () =>
  state.projects.find((p) => p.id === state.project) ?? { id: state.project, flags: [], webhooks: [] };
const safeId = (value) => value.replace(/[^A-Za-z0-9_-]/g, "_");

// ---- projects, flags and webhooks

function renderProjects() {
  const select = $("#project");
  const ids = state.projects.map((p) => p.id);
  if (!ids.includes(state.project)) ids.unshift(state.project);
  select.replaceChildren(...ids.map((id) => h("option", { value: id, selected: id === state.project }, id)));
}

function renderFlags() {
  const { flags } = currentProject();
  $("#flags-head").replaceChildren(
    h("th", { scope: "col" }, "Flag"),
    ...state.environments.map((env) => h("th", { scope: "col" }, env)),
    h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")),
  );
  $("#flags tbody").replaceChildren(
    ...flags.map((flag) =>
      h(
        "tr",
        { "data-flag": flag.key },
        h(
          "th",
          { scope: "row" },
          h("code", {}, flag.key),
          h("span", { class: "type" }, flag.type),
          flag.tags.map((tag) => h("span", { class: "tag" }, tag)),
        ),
        state.environments.map((env) => envCell(flag, env)),
        h(
          "td",
          {},
          h(
            "button",
            {
              type: "button",
              class: "quiet",
              id: `delete-${safeId(flag.key)}`,
              "aria-label": `Delete flag ${flag.key}`,
              onclick: () => {
                if (confirm(`Delete the flag ${flag.key} in every environment?`)) {
                  attempt(() => api("DELETE", `/flags/${encodeURIComponent(flag.key)}`));
                }
              },
            },
            "Delete",
          ),
        ),
      ),
    ),
  );
  $("#no-flags").hidden = flags.length > 0;
  const form = $("#rollout");
  const chosen = form.flag.value;
  form.flag.replaceChildren(...flags.map((f) => h("option", { selected: f.key === chosen }, f.key)));
  const env = form.environment.value;
  form.environment.replaceChildren(...state.environments.map((e) => h("option", { selected: e === env }, e)));
}

function envCell(flag, env) {
  const envState = flag.environments[env];
  if (!envState) return h("td", {}, "—");
  const id = `${safeId(flag.key)}--${safeId(env)}`;
  return h(
    "td",
    { class: "env" },
    h(
      "label",
      { class: "switch" },
      h("input", {
        type: "checkbox",
        role: "switch",
        id: `on-${id}`,
        checked: envState.on,
        "aria-label": `${flag.key} on in ${env}`,
        onchange: (event) => {
          const on = event.target.checked;
          attempt(() => api("PATCH", `/flags/${encodeURIComponent(flag.key)}`, { environment: env, on }));
        },
      }),
      h("span", { class: "state", "aria-hidden": "true" }, envState.on ? "on" : "off"),
    ),
    h(
      "label",
      { class: "percent" },
      h("span", { class: "sr-only" }, `Rollout percent of ${flag.key} in ${env}`),
      h("input", {
        type: "number",
        id: `rollout-${id}`,
        min: 0,
        max: 100,
        step: "any",
        placeholder: "—",
        value: envState.rollout ? String(envState.rollout.percent) : "",
        onchange: (event) => {
          const percent = Number(event.target.value);
          attempt(() =>
            api("PATCH", `/flags/${encodeURIComponent(flag.key)}`, { environment: env, rollout: { percent } }),
          );
        },
      }),
      h("span", { "aria-hidden": "true" }, "%"),
    ),
  );
}

function renderWebhooks() {
  const { webhooks } = currentProject();
  $("#webhooks").replaceChildren(
    ...webhooks.map((webhook) =>
      h(
        "li",
        { "data-webhook": webhook.id },
        h("div", {}, h("code", { class: "url" }, webhook.url)),
        h(
          "div",
          { class: "meta" },
          h("span", {}, webhook.id),
          h("span", {}, webhook.events.join(", ")),
          h("span", {}, webhook.environments ? webhook.environments.join(", ") : "all environments"),
        ),
        h(
          "button",
          {
            type: "button",
            class: "quiet",
            id: `delete-${webhook.id}`,
            "aria-label": `Delete webhook ${webhook.url}`,
            onclick: () => attempt(() => api("DELETE", `/webhooks/${encodeURIComponent(webhook.id)}`)),
          },
          "Delete",
        ),
      ),
    ),
  );
  $("#no-webhooks").hidden = webhooks.length > 0;
}

function renderForms() {
  const checkbox = (name, value, checked) =>
    h("label", { class: "check" }, h("input", { type: "checkbox", name, value, checked }), value);
  $("#webhook-events").replaceChildren(
    h("legend", {}, "Events"),
    ...state.eventTypes.map((type) => checkbox("events", type, true)),
  );
  $("#webhook-environments").replaceChildren(
    h("legend", {}, "Environments ", h("small", {}, "(none checked: all)")),
    ...state.environments.map((env) => checkbox("environments", env, false)),
  );
  const r = state.retry;
  if (r) {
    $("#retry-policy").textContent =
      `Retry policy: up to ${r.attempts} attempts, waiting ${r.initialDelayMs} ms then doubling (at most ${r.maxDelayMs} ms); ` +
      `an attempt times out after ${r.timeoutMs} ms.`;
  }
}

function renderProjectViews() {
  keepFocus(() => {
    renderProjects();
    renderFlags();
    renderWebhooks();
  });
}

// ---- deliveries

const pretty = (body) => {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
};
const show = (value) => (value === undefined ? "—" : JSON.stringify(value));
const time = (iso) => new Date(iso).toLocaleTimeString([], { hour12: false });
const quote = (text) => `'${text.replaceAll("'", `'\\''`)}'`;

function curlOf(delivery) {
  const headers = Object.entries(delivery.request.headers).map(
    ([name, value]) => `  -H ${quote(`${name}: ${value}`)} \\`,
  );
  return [`curl -X POST ${quote(delivery.url)} \\`, ...headers, `  --data-raw ${quote(delivery.request.body)}`].join(
    "\n",
  );
}

function outcome(delivery) {
  const last = delivery.attempts.at(-1);
  if (delivery.state === "pending") {
    return { label: last ? `retrying (${last.status ?? last.error})` : "sending…", kind: "pending" };
  }
  if (delivery.state === "cancelled") return { label: "cancelled: webhook deleted", kind: "cancelled" };
  const status = last?.status ?? last?.error ?? "no response";
  if (delivery.state === "succeeded") return { label: String(status), kind: "ok" };
  return { label: delivery.kind === "tampered" ? `${status} refused` : `${status} failed`, kind: "failed" };
}

function renderDelivery(delivery) {
  let event;
  try {
    event = JSON.parse(delivery.request.body);
  } catch {
    event = {};
  }
  const { label, kind } = outcome(delivery);
  const id = safeId(delivery.id);
  const data = event.data ?? {};
  const sections = [];

  sections.push(
    h(
      "table",
      { class: "attempts" },
      h("caption", {}, "Attempts"),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["#", "Sent", "Status", "Duration", "Response"].map((t) => h("th", { scope: "col" }, t)),
        ),
      ),
      h(
        "tbody",
        {},
        delivery.attempts.length === 0
          ? h("tr", {}, h("td", { colspan: 5 }, "in flight…"))
          : delivery.attempts.map((a) =>
              h(
                "tr",
                { class: a.status >= 200 && a.status < 300 ? "ok" : "failed" },
                h("td", {}, a.number),
                h("td", {}, time(a.startedAt)),
                h("td", {}, a.status ?? a.error),
                h("td", {}, `${a.durationMs} ms`),
                h(
                  "td",
                  {},
                  a.responseHeaders
                    ? h(
                        "dl",
                        { class: "response-headers", "aria-label": `Response headers of attempt ${a.number}` },
                        Object.entries(a.responseHeaders).map(([name, value]) => [
                          h("dt", {}, name),
                          h("dd", {}, h("code", {}, value)),
                        ]),
                      )
                    : null,
                  h("code", { class: "response" }, a.responseBody ?? ""),
                ),
              ),
            ),
      ),
    ),
  );
  if (delivery.state === "pending" && delivery.nextAttemptAt) {
    sections.push(h("p", { class: "hint" }, `Next attempt at ${time(delivery.nextAttemptAt)}.`));
  }
  if (event.type === "flag.updated" && Array.isArray(data.changes)) {
    sections.push(
      h(
        "table",
        { class: "changes" },
        h("caption", {}, "Changes", data.actor ? ` by ${data.actor.email} (${data.actor.type})` : ""),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Field", "From", "", "To"].map((t) => h("th", { scope: "col" }, t)),
          ),
        ),
        h(
          "tbody",
          {},
          data.changes.map((c) =>
            h(
              "tr",
              {},
              h("td", {}, h("code", {}, c.path)),
              h("td", {}, h("code", {}, show(c.from))),
              h("td", { "aria-hidden": "true" }, "→"),
              h("td", {}, h("code", {}, show(c.to))),
            ),
          ),
        ),
      ),
    );
    if (data.comment) sections.push(h("p", { class: "comment" }, `Comment: ${data.comment}`));
  }
  sections.push(
    h(
      "div",
      { class: "request" },
      h(
        "div",
        {},
        h("h4", {}, "Request headers"),
        h(
          "dl",
          { class: "headers" },
          Object.entries(delivery.request.headers).map(([name, value]) => [
            h("dt", {}, name),
            h("dd", {}, h("code", {}, value)),
          ]),
        ),
      ),
      h("div", {}, h("h4", {}, "Body"), h("pre", { class: "body" }, pretty(delivery.request.body))),
    ),
  );
  const curl = h("textarea", {
    class: "curl",
    readonly: true,
    rows: 6,
    hidden: true,
    "aria-label": "curl command for this delivery",
  });
  sections.push(
    h(
      "div",
      { class: "actions" },
      h(
        "button",
        {
          type: "button",
          id: `redeliver-${id}`,
          onclick: () =>
            attempt(() => call("POST", `/_emulator/deliveries/${encodeURIComponent(delivery.id)}/redeliver`)),
        },
        "Redeliver",
      ),
      h(
        "button",
        {
          type: "button",
          id: `tamper-${id}`,
          title: 'Sends the body with "tampered": true added and the original signature: the app must refuse it',
          onclick: () =>
            attempt(() => call("POST", `/_emulator/deliveries/${encodeURIComponent(delivery.id)}/tampered-copy`)),
        },
        "Send tampered copy",
      ),
      h(
        "button",
        {
          type: "button",
          id: `curl-${id}`,
          onclick: async () => {
            curl.value = curlOf(delivery);
            curl.hidden = false;
            try {
              await navigator.clipboard.writeText(curl.value);
              toast("curl command copied");
            } catch {
              curl.select();
              toast("Select the command below and copy it");
            }
          },
        },
        "Copy as curl",
      ),
    ),
    curl,
  );

  const kinds = { redelivery: "redelivery", tampered: "tampered copy" };
  return h(
    "li",
    {
      id: `delivery-${id}`,
      "data-delivery": delivery.id,
      "data-kind": delivery.kind,
      "data-state": delivery.state,
      class: kind,
    },
    h(
      "details",
      {},
      h(
        "summary",
        {},
        h("span", { class: `badge ${kind}` }, label),
        h("strong", { class: "event-type" }, delivery.event.type),
        h("span", { class: "env" }, delivery.event.environment),
        data.flag ? h("code", { class: "flag" }, data.flag) : null,
        kinds[delivery.kind] ? h("span", { class: "kind" }, kinds[delivery.kind]) : null,
        h("span", { class: "target" }, "→ ", delivery.url),
        h("time", { datetime: delivery.createdAt }, time(delivery.createdAt)),
      ),
      sections,
    ),
  );
}

function upsertDelivery(delivery) {
  state.deliveries.set(delivery.id, delivery);
  if (delivery.project !== state.project) return;
  const list = $("#deliveries");
  const old = document.getElementById(`delivery-${safeId(delivery.id)}`);
  const element = renderDelivery(delivery);
  if (old) {
    // Keep what the reader opened, and the focus of the button they pressed.
    element.querySelector("details").open = old.querySelector("details").open;
    const curl = old.querySelector(".curl");
    if (!curl.hidden) Object.assign(element.querySelector(".curl"), { hidden: false, value: curl.value });
    keepFocus(() => old.replaceWith(element));
  } else {
    list.prepend(element);
  }
  renderDeliveryCount();
}

function renderDeliveries() {
  const mine = [...state.deliveries.values()].filter((d) => d.project === state.project).reverse();
  $("#deliveries").replaceChildren(...mine.map(renderDelivery));
  renderDeliveryCount();
}

function renderDeliveryCount() {
  const count = $("#deliveries").children.length;
  $("#delivery-count").textContent = count ? `(${count})` : "";
  $("#no-deliveries").hidden = count > 0;
}

// ---- wiring

async function loadState() {
  const snapshot = await call("GET", "/_emulator/state");
  state.environments = snapshot.environments;
  state.eventTypes = snapshot.eventTypes;
  state.retry = snapshot.retry;
  state.projects = snapshot.projects;
  if (!state.projects.some((p) => p.id === state.project) && state.projects[0]) state.project = state.projects[0].id;
  state.deliveries = new Map(snapshot.deliveries.map((d) => [d.id, d]));
  renderForms();
  renderProjectViews();
  renderDeliveries();
}

function connect() {
  stream = new EventSource(`/_emulator/events?token=${encodeURIComponent(token)}`);
  const status = $("#connection");
  stream.addEventListener("open", () => {
    status.textContent = "live";
    status.dataset.state = "live";
    // (Re)connected: catch up on whatever happened while the stream was down.
    attempt(loadState);
  });
  stream.addEventListener("error", () => {
    status.textContent = "reconnecting…";
    status.dataset.state = "down";
  });
  stream.addEventListener("projects", (event) => {
    state.projects = JSON.parse(event.data);
    renderProjectViews();
  });
  stream.addEventListener("delivery", (event) => upsertDelivery(JSON.parse(event.data)));
}

$("#project").addEventListener("change", (event) => {
  state.project = event.target.value;
  renderProjectViews();
  renderDeliveries();
});

$("#create-flag").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.target;
  attempt(async () => {
    const body = { key: form.key.value.trim(), type: form.type.value };
    if (form.variations.value.trim()) {
      try {
        body.variations = JSON.parse(form.variations.value);
      } catch {
        throw new Error('Variations must be JSON, e.g. ["a", "b"]');
      }
    }
    const tags = form.tags.value
      .split(",")
      .map((t) => t.trim())
      .filter(Boolean);
    if (tags.length) body.tags = tags;
    await api("POST", "/flags", body);
    form.reset();
    form.key.focus();
    toast(`Created ${body.key}, switched off in every environment`);
  });
});

$("#rollout").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.target;
  attempt(() =>
    call(
      "POST",
      `/_emulator/projects/${encodeURIComponent(state.project)}/flags/${encodeURIComponent(form.flag.value)}/rollout-step`,
      { environment: form.environment.value, percent: Number(form.percent.value) },
    ),
  );
});

$("#guard").addEventListener("click", () => {
  const form = $("#rollout");
  if (!form.flag.value) return toast("Create a flag first", "error");
  attempt(() =>
    call(
      "POST",
      `/_emulator/projects/${encodeURIComponent(state.project)}/flags/${encodeURIComponent(form.flag.value)}/guard-triggered`,
      { environment: form.environment.value, action: form.guardAction.value },
    ),
  );
});

$("#create-webhook").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.target;
  attempt(async () => {
    const checked = (name) => [...form.querySelectorAll(`input[name="${name}"]:checked`)].map((i) => i.value);
    const body = { url: form.url.value.trim(), events: checked("events") };
    const environments = checked("environments");
    if (environments.length) body.environments = environments;
    const created = await api("POST", "/webhooks", body);
    // The secret is in this response only (spec section 2): shown now, kept nowhere.
    $("#secret-value").textContent = created.secret;
    $("#secret").hidden = false;
    $("#copy-secret").focus();
    form.url.value = "";
  });
});

$("#copy-secret").addEventListener("click", () =>
  attempt(async () => {
    await navigator.clipboard.writeText($("#secret-value").textContent);
    toast("Secret copied");
  }),
);
$("#hide-secret").addEventListener("click", () => {
  $("#secret-value").textContent = "";
  $("#secret").hidden = true;
});

/** No token, or a wrong one: ask for it, and start once it is given. */
function signIn(message) {
  const form = $("#sign-in");
  if (message) form.querySelector("p").textContent = message;
  form.hidden = false;
  form.token.focus();
}

$("#sign-in").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.target;
  token = form.token.value.trim();
  sessionStorage.setItem("emulator-token", token);
  auth = { authorization: `Bearer ${token}` };
  form.token.value = "";
  form.hidden = true;
  start();
});

let stream;
function start() {
  stream?.close();
  attempt(loadState);
  connect();
}

if (token) start();
else signIn();
