// Command minio-warp drives Hangar through minio-go v7, the S3 client of
// MinIO's `warp` benchmark, the way warp does: it creates a bucket, PUTs
// objects of 4 KiB and 10 MiB (the big ones multipart, with minio-go's
// default checksums and concurrency), GETs and STATs them with content
// checks, lists them by prefix and delimiter (and with minio-go's metadata
// listing extension), runs `warp mixed`'s 45/30/15/10 GET/STAT/PUT/DELETE
// mix for a while, and deletes everything in batches.
//
// Unlike warp it checks every answer: bodies byte for byte (each key's
// content is a deterministic pseudo-random function of the key), sizes,
// ETags, user metadata, content types, listings against what was written.
// It exits 1 with a "FAIL:" line on the first mismatch or error, and prints
// a summary otherwise. minio-go's retries are off (-retries 1) so that no
// error is hidden by a retry.
//
// Built in GOPATH mode against Debian's packages (golang-go,
// golang-github-minio-minio-go-v7-dev), offline:
//
//	GO111MODULE=off GOPROXY=off GOFLAGS= GOPATH=$tmp:/usr/share/gocode go build
//
// (k2v-style-tests/python/test_minio_go.py does that and runs it against
// one node and against a 3-node cluster.)
package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

const (
	KiB = 1024
	MiB = 1024 * 1024
)

var (
	endpoints   = flag.String("endpoint", "127.0.0.1:3900", "S3 endpoint(s), host:port, comma-separated; requests are spread over them round-robin (warp --host)")
	accessKey   = flag.String("access-key", "", "access key id")
	secretKey   = flag.String("secret-key", "", "secret access key")
	region      = flag.String("region", "garage", "region the endpoint signs with")
	bucket      = flag.String("bucket", "minio-warp", "bucket to create (must not exist)")
	duration    = flag.Duration("duration", 3*time.Second, "length of the mixed phase")
	concurrent  = flag.Int("concurrent", 8, "goroutines of the mixed phase and of the small-object PUTs (warp --concurrent)")
	smallCount  = flag.Int("objects", 24, "number of 4 KiB objects")
	mixedCount  = flag.Int("mixed-objects", 40, "objects created before the mixed phase (warp --objects)")
	mixedSize   = flag.Int("mixed-size", 64*KiB, "largest object of the mixed phase; sizes are 1..this (warp --obj.randsize)")
	bigSize     = flag.Int("big-size", 10*MiB, "size of the big (multipart) objects")
	partSize    = flag.Int("part-size", 5*MiB, "PartSize for the big objects (minio-go sends multipart at or above it)")
	batch       = flag.Int("batch", 10, "keys per RemoveObjects batch (warp delete --batch)")
	retries     = flag.Int("retries", 1, "minio.MaxRetry: attempts per request (1: no retry)")
	trace       = flag.Bool("trace", false, "print every request and answer (headers) on stderr (minio-go's TraceOn)")
	withTrailer = flag.Bool("trailing-headers", true, "also upload through a client with Options.TrailingHeaders (CRC32C trailers)")
)

// ------------------------------------------------------------ failing

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func check(err error, format string, args ...interface{}) {
	if err != nil {
		fail("%s: %s", fmt.Sprintf(format, args...), describe(err))
	}
}

// describe renders an error with the S3 fields minio-go parsed out of it.
func describe(err error) string {
	r := minio.ToErrorResponse(err)
	if r.Code == "" && r.StatusCode == 0 {
		return err.Error()
	}
	return fmt.Sprintf("%v (HTTP %d, Code %q, Message %q, RequestID %q)", err, r.StatusCode, r.Code, r.Message, r.RequestID)
}

// ------------------------------------------------------------ content

// seedOf is the seed of a key's content.
func seedOf(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64()
}

// body is the content of `key`: `size` bytes of splitmix64 output seeded by
// the key.
func body(key string, size int) []byte {
	b := make([]byte, size)
	s := seedOf(key)
	for i := 0; i < size; i += 8 {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		for j := 0; j < 8 && i+j < size; j++ {
			b[i+j] = byte(z >> (8 * j))
		}
	}
	return b
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// multipartETag is S3's ETag of an object uploaded in parts of `part` bytes.
func multipartETag(b []byte, part int) string {
	var sums []byte
	n := 0
	for off := 0; off < len(b); off += part {
		end := off + part
		if end > len(b) {
			end = len(b)
		}
		s := md5.Sum(b[off:end])
		sums = append(sums, s[:]...)
		n++
	}
	s := md5.Sum(sums)
	return fmt.Sprintf("%s-%d", hex.EncodeToString(s[:]), n)
}

// firstDiff is the offset of the first differing byte, or -1.
func firstDiff(a, b []byte) int {
	n := len(a)
	if len(b) < n {
		n = len(b)
	}
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return n
	}
	return -1
}

// onlyReader hides a reader's ReadAt/Seek, as warp's generated readers do
// not offer ReadAt: minio-go then uploads the parts one after the other,
// each with an x-amz-checksum-crc32c header, and sends the checksum of the
// checksums with CompleteMultipartUpload.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// ------------------------------------------------------------ objects

// object is what was written under a key.
type object struct {
	key         string
	size        int
	etag        string // unquoted
	contentType string
	meta        map[string]string // canonical names without X-Amz-Meta-
}

func (o object) data() []byte { return body(o.key, o.size) }

// smallObject is the i-th 4 KiB object: spread over three "directories" and
// the top of warp/, with user metadata and one of two content types.
func smallObject(i int) object {
	var key string
	if i%4 == 3 {
		key = fmt.Sprintf("warp/top-%03d.bin", i)
	} else {
		key = fmt.Sprintf("warp/d%d/obj-%03d.bin", i%4, i)
	}
	ct := "application/octet-stream"
	if i%2 == 1 {
		ct = "text/plain; charset=utf-8"
	}
	return object{
		key: key, size: 4 * KiB, contentType: ct,
		meta: map[string]string{"Warp-Index": strconv.Itoa(i), "Warp-Seed": strconv.FormatUint(seedOf(key), 16)},
	}
}

type runner struct {
	ctx     context.Context
	clients []*minio.Client
	next    uint64
	ops     map[string]*int64
	opsMu   sync.Mutex
	bytesUp int64
	bytesDn int64
}

// client returns the endpoints' clients round-robin.
func (r *runner) client() *minio.Client {
	i := atomic.AddUint64(&r.next, 1)
	return r.clients[int(i%uint64(len(r.clients)))]
}

func (r *runner) count(op string) {
	r.opsMu.Lock()
	c, ok := r.ops[op]
	if !ok {
		c = new(int64)
		r.ops[op] = c
	}
	r.opsMu.Unlock()
	atomic.AddInt64(c, 1)
}

func (r *runner) put(c *minio.Client, o *object, opts minio.PutObjectOptions, reader io.Reader, wantETag string) minio.UploadInfo {
	data := o.data()
	if reader == nil {
		reader = bytes.NewReader(data)
	}
	opts.ContentType = o.contentType
	opts.UserMetadata = o.meta
	info, err := c.PutObject(r.ctx, *bucket, o.key, reader, int64(len(data)), opts)
	check(err, "PutObject %s (%d bytes) via %s", o.key, len(data), c.EndpointURL().Host)
	r.count("PUT")
	atomic.AddInt64(&r.bytesUp, int64(len(data)))
	if info.Size != int64(len(data)) {
		fail("PutObject %s: UploadInfo.Size %d, wrote %d", o.key, info.Size, len(data))
	}
	if info.ETag != wantETag {
		fail("PutObject %s: ETag %q, want %q", o.key, info.ETag, wantETag)
	}
	o.etag = wantETag
	return info
}

// get reads the object whole and compares it byte for byte.
func (r *runner) get(c *minio.Client, o object) {
	obj, err := c.GetObject(r.ctx, *bucket, o.key, minio.GetObjectOptions{})
	check(err, "GetObject %s via %s", o.key, c.EndpointURL().Host)
	got, err := io.ReadAll(obj)
	obj.Close()
	check(err, "GetObject %s via %s: reading the body", o.key, c.EndpointURL().Host)
	r.count("GET")
	atomic.AddInt64(&r.bytesDn, int64(len(got)))
	if want := o.data(); !bytes.Equal(got, want) {
		fail("GetObject %s via %s: %d bytes, want %d; first difference at offset %d",
			o.key, c.EndpointURL().Host, len(got), len(want), firstDiff(got, want))
	}
}

// stat checks HEAD's size, ETag, content type and user metadata.
func (r *runner) stat(c *minio.Client, o object) {
	st, err := c.StatObject(r.ctx, *bucket, o.key, minio.StatObjectOptions{})
	check(err, "StatObject %s via %s", o.key, c.EndpointURL().Host)
	r.count("STAT")
	where := fmt.Sprintf("StatObject %s via %s", o.key, c.EndpointURL().Host)
	if st.Key != o.key || st.Size != int64(o.size) || st.ETag != o.etag {
		fail("%s: key %q size %d ETag %q, want %q %d %q", where, st.Key, st.Size, st.ETag, o.key, o.size, o.etag)
	}
	if st.ContentType != o.contentType {
		fail("%s: Content-Type %q, want %q", where, st.ContentType, o.contentType)
	}
	if !sameMeta(st.UserMetadata, o.meta) {
		fail("%s: user metadata %v, want %v", where, st.UserMetadata, o.meta)
	}
}

func sameMeta(got map[string]string, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// ------------------------------------------------------------ listing

type listed struct {
	objects  []minio.ObjectInfo
	prefixes []string
}

func (r *runner) list(c *minio.Client, opts minio.ListObjectsOptions) listed {
	var out listed
	for oi := range c.ListObjects(r.ctx, *bucket, opts) {
		check(oi.Err, "ListObjects %+v via %s", opts, c.EndpointURL().Host)
		if strings.HasSuffix(oi.Key, "/") && oi.Size == 0 && oi.ETag == "" {
			out.prefixes = append(out.prefixes, oi.Key)
		} else {
			out.objects = append(out.objects, oi)
		}
	}
	r.count("LIST")
	return out
}

// checkListing compares a listing's entries with the objects expected, in
// key order, by key, size and ETag; and its common prefixes.
func checkListing(what string, got listed, want []object, wantPrefixes []string) {
	sort.Slice(want, func(i, j int) bool { return want[i].key < want[j].key })
	keys := func() (g, w []string) {
		for _, o := range got.objects {
			g = append(g, o.Key)
		}
		for _, o := range want {
			w = append(w, o.key)
		}
		return
	}
	if len(got.objects) != len(want) {
		g, w := keys()
		fail("%s: %d objects %v, want %d %v", what, len(got.objects), g, len(want), w)
	}
	for i, o := range got.objects {
		w := want[i]
		// minio-go 7.0.46 takes the quotes off ListObjectsV2's ETags but
		// not off V1's (UseV1); the server sends them quoted in both.
		etag := strings.Trim(o.ETag, `"`)
		if o.Key != w.key || o.Size != int64(w.size) || etag != w.etag {
			fail("%s: entry %d is %q size %d ETag %q, want %q %d %q", what, i, o.Key, o.Size, o.ETag, w.key, w.size, w.etag)
		}
		if o.LastModified.IsZero() {
			fail("%s: %q has no LastModified", what, o.Key)
		}
	}
	if strings.Join(got.prefixes, ",") != strings.Join(wantPrefixes, ",") {
		fail("%s: common prefixes %v, want %v", what, got.prefixes, wantPrefixes)
	}
}

// ------------------------------------------------------------ mixed

// pool is the set of finished objects of the mixed phase. GET and STAT
// borrow a key; DELETE takes one nobody borrows out of the pool first, so
// every GET and STAT must succeed.
type pool struct {
	mu    sync.Mutex
	keys  []string
	index map[string]int
	inUse map[string]int
}

func newPool() *pool { return &pool{index: map[string]int{}, inUse: map[string]int{}} }

func (p *pool) add(k string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.index[k] = len(p.keys)
	p.keys = append(p.keys, k)
}

func (p *pool) removeLocked(k string) {
	i := p.index[k]
	last := p.keys[len(p.keys)-1]
	p.keys[i] = last
	p.index[last] = i
	p.keys = p.keys[:len(p.keys)-1]
	delete(p.index, k)
}

func (p *pool) borrow(rng *rand.Rand) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.keys) == 0 {
		return "", false
	}
	k := p.keys[rng.Intn(len(p.keys))]
	p.inUse[k]++
	return k, true
}

func (p *pool) giveBack(k string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inUse[k]--; p.inUse[k] == 0 {
		delete(p.inUse, k)
	}
}

// take removes a key no one has borrowed, for DELETE.
func (p *pool) take(rng *rand.Rand) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for try := 0; try < 8 && len(p.keys) > 0; try++ {
		k := p.keys[rng.Intn(len(p.keys))]
		if p.inUse[k] == 0 {
			p.removeLocked(k)
			return k, true
		}
	}
	return "", false
}

func (p *pool) snapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}

func mixedObject(key string) object {
	size := 1 + int(seedOf(key)%uint64(*mixedSize))
	d := body(key, size)
	return object{key: key, size: size, etag: md5hex(d), contentType: "application/octet-stream",
		meta: map[string]string{"Warp-Mixed": "1"}}
}

func (r *runner) mixed() (map[string]int64, time.Duration) {
	p := newPool()
	var wg sync.WaitGroup
	sem := make(chan struct{}, *concurrent)
	for i := 0; i < *mixedCount; i++ {
		o := mixedObject(fmt.Sprintf("mixed/prep-%04d", i))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r.put(r.client(), &o, minio.PutObjectOptions{}, nil, o.etag)
			p.add(o.key)
		}()
	}
	wg.Wait()

	counts := make([]map[string]int64, *concurrent)
	start := time.Now()
	deadline := start.Add(*duration)
	for w := 0; w < *concurrent; w++ {
		counts[w] = map[string]int64{}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 1))
			seq := 0
			for time.Now().Before(deadline) {
				c := r.client()
				op := rng.Intn(100)
				switch {
				case op < 45: // GET
					if k, ok := p.borrow(rng); ok {
						r.get(c, mixedObject(k))
						p.giveBack(k)
						counts[w]["GET"]++
						continue
					}
				case op < 75: // STAT
					if k, ok := p.borrow(rng); ok {
						r.stat(c, mixedObject(k))
						p.giveBack(k)
						counts[w]["STAT"]++
						continue
					}
				case op >= 90: // DELETE
					if k, ok := p.take(rng); ok {
						err := c.RemoveObject(r.ctx, *bucket, k, minio.RemoveObjectOptions{})
						check(err, "RemoveObject %s via %s", k, c.EndpointURL().Host)
						r.count("DELETE")
						counts[w]["DELETE"]++
						// Read after delete, through another endpoint.
						c2 := r.client()
						_, err = c2.StatObject(r.ctx, *bucket, k, minio.StatObjectOptions{})
						if code := minio.ToErrorResponse(err).Code; code != "NoSuchKey" {
							fail("StatObject %s via %s after its DELETE: want NoSuchKey, got %v", k, c2.EndpointURL().Host, err)
						}
						continue
					}
				}
				// PUT (also when there was nothing to GET, STAT or DELETE).
				seq++
				o := mixedObject(fmt.Sprintf("mixed/w%02d-%05d", w, seq))
				r.put(c, &o, minio.PutObjectOptions{}, nil, o.etag)
				p.add(o.key)
				counts[w]["PUT"]++
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)

	total := map[string]int64{}
	for _, m := range counts {
		for k, v := range m {
			total[k] += v
		}
	}
	// What is left must be exactly what the pool holds.
	var want []object
	for _, k := range p.snapshot() {
		want = append(want, mixedObject(k))
	}
	checkListing("ListObjects mixed/ after the mixed phase",
		r.list(r.client(), minio.ListObjectsOptions{Prefix: "mixed/", Recursive: true}), want, nil)
	return total, elapsed
}

// ------------------------------------------------------------ main

func newClient(endpoint string, trailing bool) *minio.Client {
	c, err := minio.New(endpoint, &minio.Options{
		Creds:           credentials.NewStaticV4(*accessKey, *secretKey, ""),
		Secure:          false,
		Region:          *region,
		TrailingHeaders: trailing,
	})
	check(err, "minio.New(%s)", endpoint)
	if *trace {
		c.TraceOn(os.Stderr)
	}
	return c
}

func main() {
	flag.Parse()
	if *accessKey == "" || *secretKey == "" {
		fail("-access-key and -secret-key are required")
	}
	minio.MaxRetry = *retries
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := &runner{ctx: ctx, ops: map[string]*int64{}}
	for _, e := range strings.Split(*endpoints, ",") {
		r.clients = append(r.clients, newClient(strings.TrimSpace(e), false))
	}
	t0 := time.Now()
	notes := []string{}

	// --- bucket, as warp prepares it: exists? else make.
	c := r.clients[0]
	ok, err := c.BucketExists(ctx, *bucket)
	check(err, "BucketExists %s (before creating it)", *bucket)
	if ok {
		fail("bucket %s exists already", *bucket)
	}
	check(c.MakeBucket(ctx, *bucket, minio.MakeBucketOptions{Region: *region}), "MakeBucket %s", *bucket)
	for _, cl := range r.clients {
		ok, err := cl.BucketExists(ctx, *bucket)
		check(err, "BucketExists %s via %s", *bucket, cl.EndpointURL().Host)
		if !ok {
			fail("BucketExists %s via %s: false after MakeBucket", *bucket, cl.EndpointURL().Host)
		}
	}
	buckets, err := c.ListBuckets(ctx)
	check(err, "ListBuckets")
	found := false
	for _, b := range buckets {
		found = found || b.Name == *bucket
	}
	if !found {
		fail("ListBuckets: %s missing from %d buckets", *bucket, len(buckets))
	}

	// --- 4 KiB objects, concurrently (single PUTs, streaming signature).
	small := make([]object, *smallCount)
	var wg sync.WaitGroup
	sem := make(chan struct{}, *concurrent)
	for i := range small {
		small[i] = smallObject(i)
		wg.Add(1)
		sem <- struct{}{}
		go func(o *object) {
			defer func() { <-sem; wg.Done() }()
			r.put(r.client(), o, minio.PutObjectOptions{}, nil, md5hex(o.data()))
		}(&small[i])
	}
	wg.Wait()

	// --- big objects, multipart with PartSize < size.
	ps := uint64(*partSize)
	mk := func(key string, size int) object {
		return object{key: key, size: size, contentType: "application/octet-stream",
			meta: map[string]string{"Warp-Big": key}}
	}
	// (a) a bytes.Reader (io.ReaderAt): minio-go's parallel uploader,
	// NumThreads parts at once (default 4), no checksum headers.
	big := []object{mk("big/readat.bin", *bigSize)}
	r.put(r.client(), &big[0], minio.PutObjectOptions{PartSize: ps}, nil, multipartETag(big[0].data(), *partSize))
	// (b) a plain io.Reader, as warp's generator gives: parts in sequence,
	// each with x-amz-checksum-crc32c, CreateMultipartUpload with
	// x-amz-checksum-algorithm: CRC32C, CompleteMultipartUpload with the
	// CRC32C of the parts' CRC32Cs.
	big = append(big, mk("big/stream.bin", *bigSize+3))
	b := &big[1]
	data := b.data()
	info := r.put(r.client(), b, minio.PutObjectOptions{PartSize: ps}, onlyReader{bytes.NewReader(data)}, multipartETag(data, *partSize))
	{
		crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
		var sums []byte
		for off := 0; off < len(data); off += *partSize {
			end := off + *partSize
			if end > len(data) {
				end = len(data)
			}
			crc.Reset()
			crc.Write(data[off:end])
			sums = crc.Sum(sums)
		}
		crc.Reset()
		crc.Write(sums)
		want := base64.StdEncoding.EncodeToString(crc.Sum(nil))
		got := info.ChecksumCRC32C
		if got == "" {
			// doc/s3-compatibility.md: composite (-N) checksums of
			// multipart objects are not kept; AWS answers "<crc>-3".
			notes = append(notes, "CompleteMultipartUpload of big/stream.bin returned no ChecksumCRC32C (Hangar keeps no composite checksum)")
		} else if strings.SplitN(got, "-", 2)[0] != want {
			fail("CompleteMultipartUpload big/stream.bin: ChecksumCRC32C %q, want %q (composite of the parts' CRC32C)", got, want)
		} else {
			notes = append(notes, "CompleteMultipartUpload of big/stream.bin returned ChecksumCRC32C "+got)
		}
	}
	// (c) a bytes.Reader through a client with TrailingHeaders: the
	// parallel uploader with CreateMultipartUpload's
	// x-amz-checksum-algorithm: CRC32C and each part's CRC32C in an
	// aws-chunked trailer (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER).
	// (minio-go 7.0.46 sends no checksum with single PUTs, trailers or not.)
	if *withTrailer {
		tc := newClient(r.client().EndpointURL().Host, true)
		big = append(big, mk("big/trailer.bin", *bigSize+1))
		r.put(tc, &big[2], minio.PutObjectOptions{PartSize: ps}, nil, multipartETag(big[2].data(), *partSize))
	}
	// No upload is left in progress.
	for _, cl := range r.clients {
		for u := range cl.ListIncompleteUploads(ctx, *bucket, "", true) {
			check(u.Err, "ListIncompleteUploads via %s", cl.EndpointURL().Host)
			fail("ListIncompleteUploads via %s: %q (upload %s) is still in progress", cl.EndpointURL().Host, u.Key, u.UploadID)
		}
		r.count("LIST-UPLOADS")
	}

	// --- GET and STAT everything through every endpoint.
	all := append(append([]object(nil), small...), big...)
	for _, o := range all {
		for _, cl := range r.clients {
			r.get(cl, o)
			r.stat(cl, o)
		}
	}
	// A ranged GET across a part boundary.
	{
		o := big[1]
		from, to := int64(*partSize-100), int64(*partSize+99)
		opts := minio.GetObjectOptions{}
		check(opts.SetRange(from, to), "SetRange")
		cl := r.client()
		obj, err := cl.GetObject(ctx, *bucket, o.key, opts)
		check(err, "GetObject %s range %d-%d", o.key, from, to)
		got, err := io.ReadAll(obj)
		obj.Close()
		check(err, "GetObject %s range %d-%d: reading", o.key, from, to)
		r.count("GET")
		if !bytes.Equal(got, o.data()[from:to+1]) {
			fail("GetObject %s range %d-%d via %s: %d bytes, first difference at %d", o.key, from, to,
				cl.EndpointURL().Host, len(got), firstDiff(got, o.data()[from:to+1]))
		}
	}
	// A missing key.
	_, err = r.client().StatObject(ctx, *bucket, "warp/missing", minio.StatObjectOptions{})
	if code := minio.ToErrorResponse(err).Code; code != "NoSuchKey" {
		fail("StatObject of a missing key: want NoSuchKey, got %v", err)
	}

	// --- listings.
	var topObjs []object
	var dirs = map[string][]object{}
	for _, o := range small {
		rest := strings.TrimPrefix(o.key, "warp/")
		if i := strings.Index(rest, "/"); i >= 0 {
			dirs["warp/"+rest[:i+1]] = append(dirs["warp/"+rest[:i+1]], o)
		} else {
			topObjs = append(topObjs, o)
		}
	}
	var dirNames []string
	for d := range dirs {
		dirNames = append(dirNames, d)
	}
	sort.Strings(dirNames)
	for _, cl := range r.clients {
		host := cl.EndpointURL().Host
		// Recursive, paged by 5 (continuation tokens), V2 and V1 (markers).
		checkListing("ListObjects warp/ recursive via "+host,
			r.list(cl, minio.ListObjectsOptions{Prefix: "warp/", Recursive: true, MaxKeys: 5}), append([]object(nil), small...), nil)
		checkListing("ListObjects warp/ recursive V1 via "+host,
			r.list(cl, minio.ListObjectsOptions{Prefix: "warp/", Recursive: true, MaxKeys: 5, UseV1: true}), append([]object(nil), small...), nil)
		// Delimited at "/": the top objects and the directories.
		checkListing("ListObjects warp/ delimiter / via "+host,
			r.list(cl, minio.ListObjectsOptions{Prefix: "warp/", MaxKeys: 2}), append([]object(nil), topObjs...), dirNames)
		for _, d := range dirNames {
			checkListing("ListObjects "+d+" delimiter / via "+host,
				r.list(cl, minio.ListObjectsOptions{Prefix: d}), append([]object(nil), dirs[d]...), nil)
		}
		// The root: warp/, big/ (and nothing else yet).
		checkListing("ListObjects root delimiter / via "+host,
			r.list(cl, minio.ListObjectsOptions{}), nil, []string{"big/", "warp/"})
		// A prefix that is not a directory.
		var want []object
		for _, o := range small {
			if strings.HasPrefix(o.key, "warp/d1/obj-00") {
				want = append(want, o)
			}
		}
		checkListing("ListObjects warp/d1/obj-00 via "+host,
			r.list(cl, minio.ListObjectsOptions{Prefix: "warp/d1/obj-00", Recursive: true}), want, nil)
	}
	// minio-go's metadata listing extension (?metadata=true, MinIO only):
	// if the server answers with metadata it must be right; a plain S3
	// server ignores the parameter.
	{
		got := r.list(r.client(), minio.ListObjectsOptions{Prefix: "warp/", Recursive: true, WithMetadata: true})
		checkListing("ListObjects warp/ WithMetadata", got, append([]object(nil), small...), nil)
		withMeta := 0
		for i, oi := range got.objects {
			if len(oi.UserMetadata) == 0 {
				continue
			}
			withMeta++
			o := small[i] // sorted by key, as got is (checked above)
			for k, v := range o.meta {
				if oi.UserMetadata[k] != v && oi.UserMetadata["X-Amz-Meta-"+k] != v {
					fail("ListObjects WithMetadata: %s has UserMetadata %v, want %v", oi.Key, oi.UserMetadata, o.meta)
				}
			}
		}
		notes = append(notes, fmt.Sprintf("ListObjects WithMetadata: %d of %d entries carried user metadata (0: the server ignores metadata=true, a MinIO extension)", withMeta, len(got.objects)))
	}

	// --- warp mixed.
	mixedOps, elapsed := r.mixed()

	// --- DELETE in batches (RemoveObjects: POST ?delete), one missing key
	// in the first batch, then the listing must be empty.
	var keys []string
	for oi := range r.client().ListObjects(ctx, *bucket, minio.ListObjectsOptions{Recursive: true}) {
		check(oi.Err, "ListObjects before the batch delete")
		keys = append(keys, oi.Key)
	}
	r.count("LIST")
	keys = append([]string{"warp/never-written"}, keys...)
	batches := 0
	for off := 0; off < len(keys); off += *batch {
		end := off + *batch
		if end > len(keys) {
			end = len(keys)
		}
		ch := make(chan minio.ObjectInfo, end-off)
		for _, k := range keys[off:end] {
			ch <- minio.ObjectInfo{Key: k}
		}
		close(ch)
		cl := r.client()
		for e := range cl.RemoveObjects(ctx, *bucket, ch, minio.RemoveObjectsOptions{}) {
			fail("RemoveObjects via %s: %s: %s", cl.EndpointURL().Host, e.ObjectName, describe(e.Err))
		}
		batches++
		r.count("DELETE-BATCH")
	}
	for _, cl := range r.clients {
		left := r.list(cl, minio.ListObjectsOptions{Recursive: true})
		if len(left.objects) != 0 {
			fail("ListObjects via %s after the batch delete: %d objects left, first %q", cl.EndpointURL().Host, len(left.objects), left.objects[0].Key)
		}
	}
	check(c.RemoveBucket(ctx, *bucket), "RemoveBucket %s", *bucket)
	for _, cl := range r.clients {
		ok, err := cl.BucketExists(ctx, *bucket)
		check(err, "BucketExists %s via %s after RemoveBucket", *bucket, cl.EndpointURL().Host)
		if ok {
			fail("BucketExists %s via %s: true after RemoveBucket", *bucket, cl.EndpointURL().Host)
		}
	}

	// --- summary.
	fmt.Printf("minio-warp: OK against %d endpoint(s) %s in %.1fs (minio-go %s)\n",
		len(r.clients), *endpoints, time.Since(t0).Seconds(), minioGoVersion)
	fmt.Printf("  small objects: %d x 4 KiB; big objects: %d (multipart, PartSize %d)\n", len(small), len(big), *partSize)
	var names []string
	r.opsMu.Lock()
	for k := range r.ops {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", k, atomic.LoadInt64(r.ops[k])))
	}
	r.opsMu.Unlock()
	fmt.Printf("  requests checked: %s; %d MiB up, %d MiB down\n", strings.Join(parts, " "),
		atomic.LoadInt64(&r.bytesUp)/MiB, atomic.LoadInt64(&r.bytesDn)/MiB)
	var sum int64
	for _, v := range mixedOps {
		sum += v
	}
	pct := func(k string) float64 {
		if sum == 0 {
			return 0
		}
		return 100 * float64(mixedOps[k]) / float64(sum)
	}
	fmt.Printf("  mixed: %d ops in %.1fs with %d goroutines (%.0f ops/s): GET %d (%.0f%%) STAT %d (%.0f%%) PUT %d (%.0f%%) DELETE %d (%.0f%%)\n",
		sum, elapsed.Seconds(), *concurrent, float64(sum)/elapsed.Seconds(),
		mixedOps["GET"], pct("GET"), mixedOps["STAT"], pct("STAT"), mixedOps["PUT"], pct("PUT"), mixedOps["DELETE"], pct("DELETE"))
	fmt.Printf("  batch delete: %d keys in %d RemoveObjects batches of <= %d\n", len(keys), batches, *batch)
	for _, n := range notes {
		fmt.Printf("  note: %s\n", n)
	}
	if sum == 0 || mixedOps["GET"] == 0 || mixedOps["STAT"] == 0 || mixedOps["PUT"] == 0 || mixedOps["DELETE"] == 0 {
		fail("the mixed phase did not run every operation: %v", mixedOps)
	}
}

// minioGoVersion is minio-go's version, which the library keeps in an
// unexported constant: the build sets it with
// -ldflags "-X main.minioGoVersion=v7.0.46".
var minioGoVersion = "(version not set at build time)"
