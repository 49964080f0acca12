// `{{name}}`: a benchkit reporter plugin in JavaScript. It receives the run's
// events and returns files, which benchkit writes into the run's results
// directory. This one writes `{{name}}.md`: a table of the cells with their
// median images/s, step time and data wait.
//
// Build: `npm install && npm run build`. Check: `benchkit plugin check {{name}}.wasm`.


/**
 * `x` to one decimal, halves rounded up, computed as every scaffold language
 * computes it, so their files agree to the byte.
 * @param {number} x
 */
function tenths(x) {
  const n = Math.floor(x * 10 + 0.5);
  const a = Math.abs(n);
  return `${n < 0 ? "-" : ""}${Math.floor(a / 10)}.${a % 10}`;
}

function cell(spread) {
  const value = median(spread);
  return value === null ? "-" : tenths(value);
}

export function info() {
  return {
    name: "{{name}}",
    version: "0.1.0",
    kind: "reporter",
    description: "{{description}}",
    configSchema: JSON.stringify({ title: "string, default the run's name: the table's heading" }),
  };
}

class Reporter {
  constructor(title) {
    this.title = title;
    this.rows = [];
  }

  /** @param {string} config the user's config table as JSON */
  static create(config) {
    const settings = config.trim() === "" ? {} : JSON.parse(config);
    const unknown = Object.keys(settings).filter((key) => key !== "title").sort();
    if (unknown.length > 0) {
      throw `unknown config key \`${unknown[0]}\`; accepted keys: title`;
    }
    const title = settings.title ?? "";
    if (typeof title !== "string") {
      throw `config key \`title\`: expected a string, got ${JSON.stringify(title)}`;
    }
    return new Reporter(title);
  }

  /** @param {string} text one event, as JSON */
  onEvent(text) {
    const e = parseEvent(text);
    if (e.event === "run-start" && this.title === "") {
      this.title = e.name;
    } else if (e.event === "cell-summary") {
      this.rows.push(
        `| ${e.cell} | ${e.status} | ${cell(e.images_per_s)} | ${cell(e.step_p50_ms)} | ${cell(e.data_wait_pct)} |`,
      );
    }
  }

  finish() {
    let text = `# ${this.title}\n\n`;
    text += "| cell | status | images/s | step p50 (ms) | data wait (%) |\n";
    text += "|---|---|---|---|---|\n";
    text += this.rows.map((row) => row + "\n").join("");
    return [{ name: "{{name}}.md", contents: new TextEncoder().encode(text) }];
  }
}

export const sink = { Reporter };
