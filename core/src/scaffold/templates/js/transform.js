// `{{name}}`: a benchkit transform plugin in JavaScript. benchkit calls
// `apply` once per batch of decoded u8 images (N×H×W×C, a Uint8Array) and
// trains on the f32 tensor it makes of what `apply` returns: the pixels moved
// to N×C×H×W, still a Uint8Array, and each channel's map to f32 (value =
// byte × scale + offset), which the host applies natively (the contract's
// byte transform, 1.1.0). This one normalises each channel and, in training,
// flips images at random (seeded: same batch and seed, same output).
//
// Build: `npm install && npm run build`. Check: `benchkit plugin check {{name}}.wasm`.

/** One number per channel: a single value is repeated. */
function perChannel(key, value, channels, positive) {
  if (!Array.isArray(value)) throw `config key \`${key}\`: expected a list of numbers, got ${JSON.stringify(value)}`;
  const values = value;
  if (!values.every((v) => typeof v === "number" && (!positive || v > 0))) {
    throw `config key \`${key}\`: expected ${positive ? "positive " : ""}numbers, got ${JSON.stringify(value)}`;
  }
  if (values.length === 1) return new Array(channels).fill(values[0]);
  if (values.length === channels) return values;
  throw `config key \`${key}\`: expected 1 or ${channels} values, got ${values.length}`;
}

/** Whether image `index` of a batch with seed `seed` is flipped (splitmix64, as the Rust scaffold). */
function flipped(seed, index) {
  const mask = (1n << 64n) - 1n;
  let z = (seed + (BigInt(index) + 1n) * 0x9e3779b97f4a7c15n) & mask;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask;
  return ((z ^ (z >> 31n)) & 1n) === 1n;
}

export function info() {
  return {
    name: "{{name}}",
    version: "0.1.0",
    kind: "transform",
    description: "{{description}}",
    configSchema: JSON.stringify({
      mean: "list of numbers, one per channel or one for all; default [0.5]",
      std: "list of positive numbers, same rules; default [0.25]",
      flip: "bool, default true: flip training images left to right with probability 1/2",
    }),
  };
}

class Transform {
  static create(config, source, target) {
    const given = config.trim() === "" ? {} : JSON.parse(config);
    const unknown = Object.keys(given).filter((k) => !["mean", "std", "flip"].includes(k)).sort();
    if (unknown.length > 0) throw `unknown config key \`${unknown[0]}\`; accepted keys: flip, mean, std`;
    if (source.channels !== target.channels) {
      throw `images have ${source.channels} channels but the model wants ${target.channels}; {{name}} does not convert`;
    }
    if (source.height !== target.height || source.width !== target.width) {
      throw `images are ${source.height}x${source.width} but the model wants ${target.height}x${target.width}; {{name}} does not resize`;
    }
    const flip = given.flip ?? true;
    if (typeof flip !== "boolean") throw `config key \`flip\`: expected true or false, got ${JSON.stringify(flip)}`;
    const mean = perChannel("mean", given.mean ?? [0.5], target.channels, false);
    const std = perChannel("std", given.std ?? [0.25], target.channels, true);
    return new Transform(target, mean, std, flip);
  }

  constructor(shape, mean, std, flip) {
    this.shape = shape;
    // value = byte / 255 / std - mean / std, applied by the host.
    this.scale = Float32Array.from(std, (s) => 1 / (255 * s));
    this.offset = Float32Array.from(mean, (m, c) => -m / std[c]);
    this.flip = flip;
  }

  outputShape() {
    return this.shape;
  }

  apply(batch) {
    const { channels: c, height: h, width: w } = this.shape;
    const plane = h * w;
    const size = plane * c;
    if (batch.pixels.length !== batch.count * size) {
      throw `batch of ${batch.count} images of ${h}x${w}x${c} needs ${batch.count * size} bytes, got ${batch.pixels.length}`;
    }
    if (batch.boxes.length > 0) {
      throw "{{name}} does not move boxes with a flip: it cannot transform detection data";
    }
    const out = new Uint8Array(batch.count * size);
    for (let i = 0; i < batch.count; i++) {
      const flip = batch.augment && this.flip && flipped(batch.seed, i);
      const src = i * size;
      for (let ch = 0; ch < c; ch++) {
        const dst = i * size + ch * plane;
        for (let y = 0; y < h; y++) {
          const row = src + y * w * c + ch;
          const to = dst + y * w;
          for (let x = 0; x < w; x++) {
            out[to + (flip ? w - 1 - x : x)] = batch.pixels[row + x * c];
          }
        }
      }
    }
    return { count: batch.count, shape: this.shape, data: out, scale: this.scale, offset: this.offset, boxes: [] };
  }
}

export const byteTransformer = { Transform };
