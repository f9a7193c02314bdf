/*
 * A real Hadoop YARN ResourceManager and NodeManagers in one JVM, for laggard's operations tier.
 *
 *   java -cp 'DIR/conf:.laggard/yarn-lib/*' yarn/YarnLocal.java --dir DIR --exclude-file FILE --hosts 127.0.0.2,127.0.0.3
 *
 * The ResourceManager listens on 127.0.0.1 (ephemeral ports) with yarn.resourcemanager.nodes.exclude-path = FILE
 * (created empty if missing; Hadoop reads *.xml as XML, any other name as plain). The RM reads that path again from
 * yarn-site.xml on its classpath at every refreshNodes, as on a real cluster, so this launcher writes
 * DIR/conf/yarn-site.xml before the RM starts and DIR/conf must come first on the classpath.
 *
 * Each host gets one NodeManager bound to that address. YARN matches exclude entries against a node's host name or IP
 * only, never its port, so NodeManagers that share a host (MiniYARNCluster's are all "localhost") cannot be told
 * apart; loopback addresses 127.0.0.2, 127.0.0.3, ... are distinct hosts on one machine with no DNS entry needed.
 *
 * When ready, DIR/conf/yarn-site.xml also holds the RM's real addresses (clients such as RMAdminCLI read them with
 * DIR/conf first on their classpath) and DIR/conf/log4j.properties a quiet client logging; one line
 * "ready admin=HOST:PORT web=http://HOST:PORT conf=DIR/conf" goes to stdout. Logs go to DIR/yarn.log.
 *
 * A decommissioned NodeManager shuts itself down, as on a real cluster. Like a process supervisor (systemd's
 * Restart=always), this launcher starts a stopped NodeManager again after --restart-ms on the same host and port: the
 * RM turns it away while its host is excluded and takes it back (RUNNING) once the host is no longer excluded.
 * SIGTERM stops everything.
 */

import java.io.IOException;
import java.lang.reflect.Method;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.metrics2.lib.DefaultMetricsSystem;
import org.apache.hadoop.service.Service;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.nodemanager.NodeManager;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.webapp.WebApp;
import org.apache.log4j.PropertyConfigurator;

public class YarnLocal {
    static final String[] ADDRESSES = {YarnConfiguration.RM_ADDRESS, YarnConfiguration.RM_SCHEDULER_ADDRESS,
        YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, YarnConfiguration.RM_ADMIN_ADDRESS,
        YarnConfiguration.RM_WEBAPP_ADDRESS};
    static final String FIFO = "org.apache.hadoop.yarn.server.resourcemanager.scheduler.fifo.FifoScheduler";

    /** One host's NodeManager, restarted on the same port when it stops. */
    static final class Slot {
        final String host;
        final Path dir;
        int port;  // 0 until the first NodeManager bound one
        NodeManager nm;
        long stoppedAt = -1;

        Slot(String host, Path dir) {
            this.host = host;
            this.dir = dir;
        }
    }

    public static void main(String[] args) throws Exception {
        Path dir = null;
        Path exclude = null;
        String hosts = "127.0.0.2,127.0.0.3";
        long restartMs = 1000;
        long heartbeatMs = 500;
        for (int i = 0; i < args.length; i += 2) {
            String value = i + 1 < args.length ? args[i + 1] : usage("no value for " + args[i]);
            switch (args[i]) {
                case "--dir" -> dir = Path.of(value).toAbsolutePath();
                case "--exclude-file" -> exclude = Path.of(value).toAbsolutePath();
                case "--hosts" -> hosts = value;
                case "--restart-ms" -> restartMs = Long.parseLong(value);
                case "--heartbeat-ms" -> heartbeatMs = Long.parseLong(value);
                default -> usage("unknown option " + args[i]);
            }
        }
        if (dir == null || exclude == null) {
            usage("--dir and --exclude-file are required");
        }
        Files.createDirectories(dir.resolve("conf"));
        configureLogging(dir.resolve("yarn.log"));
        if (!Files.exists(exclude)) {
            Files.writeString(exclude, exclude.toString().endsWith(".xml") ? "<hosts></hosts>\n" : "");
        }
        DefaultMetricsSystem.setMiniClusterMode(true);  // several NodeManagers' metrics in one JVM

        // The RM reads its exclude path from yarn-site.xml on its classpath again at every refreshNodes, as on a real
        // cluster: the file is written before the RM starts, and DIR/conf must come first on this JVM's classpath.
        Path site = dir.resolve("conf").resolve("yarn-site.xml");
        Map<String, String> settings = new LinkedHashMap<>();
        settings.put("hadoop.tmp.dir", dir.resolve("tmp").toString());
        settings.put(YarnConfiguration.RM_HOSTNAME, "127.0.0.1");
        for (String key : ADDRESSES) {
            settings.put(key, "127.0.0.1:0");
        }
        settings.put(YarnConfiguration.RM_NODES_EXCLUDE_FILE_PATH, exclude.toString());
        settings.put(YarnConfiguration.RM_SCHEDULER, FIFO);
        settings.put(YarnConfiguration.RM_NM_HEARTBEAT_INTERVAL_MS, Long.toString(heartbeatMs));
        settings.put(YarnConfiguration.TIMELINE_SERVICE_ENABLED, "false");
        writeSite(site, settings);
        URL found = YarnLocal.class.getClassLoader().getResource("yarn-site.xml");
        if (found == null || !Path.of(found.toURI()).equals(site)) {
            usage(dir.resolve("conf") + " must come first on the classpath (-cp " + dir.resolve("conf") + ":LIB/*)");
        }
        YarnConfiguration conf = new YarnConfiguration();

        ResourceManager rm = new ResourceManager();
        rm.init(conf);
        rm.start();
        Configuration bound = rm.getConfig();  // the RM writes its real (ephemeral) ports back here

        List<Slot> slots = new ArrayList<>();
        for (String host : hosts.split(",")) {
            Slot slot = new Slot(host.trim(), dir.resolve("nm-" + host.trim()));
            slots.add(slot);
            startNodeManager(slot, bound, heartbeatMs);
            if (slot.nm == null) {
                throw new IllegalStateException("the NodeManager on " + slot.host + " did not start; see " +
                        dir.resolve("yarn.log"));
            }
        }

        String admin = bound.get(YarnConfiguration.RM_ADMIN_ADDRESS);
        String web = "127.0.0.1:" + webPort(rm);
        bound.set(YarnConfiguration.RM_WEBAPP_ADDRESS, web);
        for (String key : ADDRESSES) {
            settings.put(key, bound.get(key));  // clients (RMAdminCLI) read the real addresses from the same file
        }
        writeSite(site, settings);
        writeClientLogging(dir.resolve("conf"));
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (Slot slot : slots) {
                if (slot.nm != null) {
                    slot.nm.stop();
                }
            }
            rm.stop();
            stopped.countDown();
        }));
        System.out.println("ready admin=" + admin + " web=http://" + web + " conf=" + dir.resolve("conf"));
        System.out.flush();

        while (stopped.getCount() > 0) {
            Thread.sleep(200);
            long now = System.currentTimeMillis();
            for (Slot slot : slots) {
                synchronized (slot) {
                    if (slot.nm != null && slot.nm.getServiceState() == Service.STATE.STOPPED) {
                        slot.nm = null;
                        slot.stoppedAt = now;
                    }
                    if (slot.nm == null && now - slot.stoppedAt >= restartMs && stopped.getCount() > 0) {
                        slot.stoppedAt = now;
                        startNodeManager(slot, bound, heartbeatMs);
                    }
                }
            }
        }
    }

    /** A NodeManager bound to the slot's host; null in the slot when the RM turned it away (an excluded host). */
    static void startNodeManager(Slot slot, Configuration rmConf, long heartbeatMs) throws IOException {
        YarnConfiguration conf = new YarnConfiguration(rmConf);
        conf.set(YarnConfiguration.NM_ADDRESS, slot.host + ":" + slot.port);
        conf.set(YarnConfiguration.NM_LOCALIZER_ADDRESS, slot.host + ":0");
        conf.set(YarnConfiguration.NM_LOCAL_DIRS, Files.createDirectories(slot.dir.resolve("local")).toString());
        conf.set(YarnConfiguration.NM_LOG_DIRS, Files.createDirectories(slot.dir.resolve("logs")).toString());
        conf.setInt(YarnConfiguration.NM_PMEM_MB, 2048);
        conf.setInt(YarnConfiguration.NM_VCORES, 2);
        conf.setBoolean(YarnConfiguration.NM_ENABLE_HARDWARE_CAPABILITY_DETECTION, false);
        conf.setBoolean(YarnConfiguration.NM_CONTAINER_MONITOR_ENABLED, false);
        // A nearly full CI disk must not turn the nodes UNHEALTHY: this test is about exclusion, not disks.
        conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 100.0f);
        conf.setLong(YarnConfiguration.NM_MIN_PER_DISK_FREE_SPACE_MB, 0);
        conf.setLong(YarnConfiguration.RM_NM_HEARTBEAT_INTERVAL_MS, heartbeatMs);
        NodeManager nm = new NodeManager();
        try {
            nm.init(conf);
            nm.disableWebServer();  // nothing here reads a NodeManager's pages; each would add seconds to the start
            nm.start();
        } catch (RuntimeException exc) {
            System.err.println("NodeManager on " + slot.host + " not started: " + firstLine(exc));
            nm.stop();
            slot.nm = null;
            return;
        }
        slot.port = nm.getNMContext().getNodeId().getPort();
        slot.nm = nm;
    }

    /** The port the RM's web server bound (it does not write an ephemeral web port back to its configuration). */
    static int webPort(ResourceManager rm) throws ReflectiveOperationException {
        Method getWebapp = ResourceManager.class.getDeclaredMethod("getWebapp");
        getWebapp.setAccessible(true);
        return ((WebApp) getWebapp.invoke(rm)).port();
    }

    static void writeSite(Path site, Map<String, String> settings) throws IOException {
        StringBuilder xml = new StringBuilder("<?xml version=\"1.0\"?>\n<configuration>\n");
        settings.forEach((key, value) -> xml.append("  <property><name>").append(key).append("</name><value>")
                .append(value).append("</value></property>\n"));
        atomically(site, xml.append("</configuration>\n").toString());
    }

    static void writeClientLogging(Path confDir) throws IOException {
        // A client (RMAdminCLI) says what went wrong in one line; its INFO retries stay out of the way.
        atomically(confDir.resolve("log4j.properties"),
                "log4j.rootLogger=WARN, stderr\n"
                + "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                + "log4j.appender.stderr.Target=System.err\n"
                + "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                + "log4j.appender.stderr.layout.ConversionPattern=%p %c{1}: %m%n\n"
                + "log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR\n");  // no libhadoop.so: expected
    }

    static void configureLogging(Path file) {
        Properties props = new Properties();
        props.setProperty("log4j.rootLogger", "INFO, file");
        props.setProperty("log4j.appender.file", "org.apache.log4j.FileAppender");
        props.setProperty("log4j.appender.file.File", file.toString());
        props.setProperty("log4j.appender.file.layout", "org.apache.log4j.PatternLayout");
        props.setProperty("log4j.appender.file.layout.ConversionPattern", "%d %p %c{1}: %m%n");
        PropertyConfigurator.configure(props);
    }

    static void atomically(Path path, String text) throws IOException {
        Path tmp = path.resolveSibling(path.getFileName() + ".tmp");
        Files.writeString(tmp, text, StandardCharsets.UTF_8);
        Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    static String firstLine(Throwable exc) {
        String message = String.valueOf(exc.getMessage());
        return message.lines().findFirst().orElse(exc.toString());
    }

    static String usage(String problem) {
        System.err.println("YarnLocal: " + problem + "\nusage: YarnLocal --dir DIR --exclude-file FILE "
                + "[--hosts H1,H2,...] [--restart-ms MS] [--heartbeat-ms MS]");
        System.exit(2);
        return null;
    }
}
