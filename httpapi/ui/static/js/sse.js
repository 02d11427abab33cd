// Server-sent events, as the WHATWG spec parses them, reduced to what a chat stream uses: the
// data of each event. Lines end with CRLF, LF or CR; "data:" lines of one event are joined
// with "\n"; one space after the colon is dropped; comments (":") and other fields are
// skipped; an event is dispatched at a blank line, and an unfinished event at the end of the
// stream is dropped, as the spec says.

// Parser turns text, pushed in pieces of any size, into event data.
export class Parser {
  #buf = '';
  #data = [];
  #onData;

  constructor(onData) {
    this.#onData = onData;
  }

  // push feeds the next piece of the stream's text.
  push(text) {
    this.#buf += text;
    let start = 0;
    for (let i = 0; i < this.#buf.length; i++) {
      const c = this.#buf[i];
      if (c !== '\n' && c !== '\r') continue;
      if (c === '\r' && i + 1 === this.#buf.length) break; // maybe half of a CRLF: wait
      this.#line(this.#buf.slice(start, i));
      if (c === '\r' && this.#buf[i + 1] === '\n') i++;
      start = i + 1;
    }
    this.#buf = this.#buf.slice(start);
  }

  // end says the stream is over. A lone CR at the very end still ends its line.
  end() {
    if (this.#buf.endsWith('\r')) this.#line(this.#buf.slice(0, -1));
    this.#buf = '';
    this.#data = [];
  }

  #line(line) {
    if (line === '') {
      if (this.#data.length > 0) {
        const data = this.#data.join('\n');
        this.#data = [];
        this.#onData(data);
      }
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.#data.push(value);
  }
}

// events yields the data of every event of a fetch body, in order. It ends with the body;
// aborting the fetch makes the read throw, which ends it with that error. A consumer that
// stops early (at [DONE]) cancels the rest of the body.
export async function* events(body) {
  const queue = [];
  const parser = new Parser((d) => queue.push(d));
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(value);
      while (queue.length > 0) yield queue.shift();
    }
    parser.end();
    while (queue.length > 0) yield queue.shift();
  } finally {
    await reader.cancel().catch(() => {}); // nothing to cancel once the body has ended or failed
  }
}
