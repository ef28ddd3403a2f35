// A loose screenshot comparison without dependencies: a minimal PNG decoder (8-bit
// greyscale/RGB/RGBA, non-interlaced: what Chromium writes) and a check that two
// screenshots have about the same size and agree at a grid of sampled pixels.
import { inflateSync } from "node:zlib";

export function decodePng(buf) {
  const sig = "89504e470d0a1a0a";
  if (buf.subarray(0, 8).toString("hex") !== sig) throw new Error("not a PNG");
  let off = 8;
  let width = 0;
  let height = 0;
  let depth = 0;
  let colour = 0;
  let interlace = 0;
  const idat = [];
  while (off < buf.length) {
    const len = buf.readUInt32BE(off);
    const type = buf.toString("latin1", off + 4, off + 8);
    const data = buf.subarray(off + 8, off + 8 + len);
    if (type === "IHDR") {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      depth = data[8];
      colour = data[9];
      interlace = data[12];
    } else if (type === "IDAT") {
      idat.push(data);
    } else if (type === "IEND") {
      break;
    }
    off += 12 + len;
  }
  const channels = { 0: 1, 2: 3, 4: 2, 6: 4 }[colour];
  if (depth !== 8 || !channels || interlace !== 0) {
    throw new Error(`unsupported PNG (depth ${depth}, colour type ${colour}, interlace ${interlace})`);
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const px = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const out = px.subarray(y * stride, (y + 1) * stride);
    const prev = y > 0 ? px.subarray((y - 1) * stride, y * stride) : null;
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? out[x - channels] : 0;
      const b = prev ? prev[x] : 0;
      const c = prev && x >= channels ? prev[x - channels] : 0;
      let v = line[x];
      switch (filter) {
        case 0:
          break;
        case 1:
          v += a;
          break;
        case 2:
          v += b;
          break;
        case 3:
          v += (a + b) >> 1;
          break;
        case 4: {
          const p = a + b - c;
          const pa = Math.abs(p - a);
          const pb = Math.abs(p - b);
          const pc = Math.abs(p - c);
          v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default:
          throw new Error(`bad PNG filter ${filter}`);
      }
      out[x] = v & 0xff;
    }
  }
  const rgb = (x, y) => {
    const i = y * stride + x * channels;
    if (channels >= 3) return [px[i], px[i + 1], px[i + 2]];
    return [px[i], px[i], px[i]];
  };
  return { width, height, rgb };
}

/**
 * Loose comparison: sizes within `sizeSlack` px, and at least `minShare` of a
 * `grid`×`grid` set of sampled pixels within `tolerance` per channel. Returns
 * { ok, reason }.
 */
export function compareLoosely(actualBuf, expectedBuf, { sizeSlack = 4, grid = 7, tolerance = 40, minShare = 0.8 } = {}) {
  const a = decodePng(actualBuf);
  const e = decodePng(expectedBuf);
  if (Math.abs(a.width - e.width) > sizeSlack || Math.abs(a.height - e.height) > sizeSlack) {
    return { ok: false, reason: `size ${a.width}x${a.height}, expected ${e.width}x${e.height} (±${sizeSlack})` };
  }
  const w = Math.min(a.width, e.width);
  const h = Math.min(a.height, e.height);
  let close = 0;
  let total = 0;
  const misses = [];
  for (let i = 0; i < grid; i++) {
    for (let j = 0; j < grid; j++) {
      const x = Math.floor(((i + 0.5) / grid) * w);
      const y = Math.floor(((j + 0.5) / grid) * h);
      const pa = a.rgb(x, y);
      const pe = e.rgb(x, y);
      total += 1;
      if (pa.every((v, k) => Math.abs(v - pe[k]) <= tolerance)) close += 1;
      else misses.push(`(${x},${y}) ${pa.join("/")} vs ${pe.join("/")}`);
    }
  }
  if (close / total < minShare) {
    return { ok: false, reason: `${close}/${total} sampled pixels close; misses: ${misses.slice(0, 6).join(", ")}` };
  }
  return { ok: true, reason: `${close}/${total} sampled pixels close` };
}
